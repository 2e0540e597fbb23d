//! Fleet: the steps a VM goes through and what operators see of them, on top of `records` (the
//! writes). A VM's shared steps: made, faulted, replaced, drained, dropped (`lifecycle`); rolling
//! updates of VMs made from older attributes (`rollout`; the mark on the Config record is
//! `model::rollout_mark`); a Config's status, the read model (`status`; its stored shape is
//! `model::status_view`). A new VM record made and handed to its provider is `making`, above the
//! providers.

pub mod lifecycle;
pub mod rollout;
pub mod status;
