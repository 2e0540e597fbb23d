//! `Ctx`: what handlers, cron jobs and operator operations get: the [`Env`] (ports and
//! settings, which it derefs to) and the declared machine [`Providers`].

use std::sync::Arc;

use crate::catalog::Verdict;
use crate::config::Config;
use crate::env::Env;
use crate::error::TaskError;
use crate::model::Vm;
use crate::ports::store::Versioned;
use crate::providers::Providers;

/// The context of the top floor: the environment, and the providers machines come from.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Ports and settings (what the shared machinery below the providers takes).
    pub env: Env,
    /// Where machines come from: the declared providers.
    pub providers: Arc<Providers>,
}

impl std::ops::Deref for Ctx {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}

impl std::ops::DerefMut for Ctx {
    fn deref_mut(&mut self) -> &mut Env {
        &mut self.env
    }
}

impl Ctx {
    /// Checks `config` with its provider (which must be declared): what the provider does not
    /// offer is invalid; a provider that cannot tell now (or is not set up) says unknown. A
    /// regional Config gets its region's zones first ([`crate::catalog::Catalog::place`]); while
    /// they are not known it is unplaced, and must not be applied.
    pub async fn validate(&self, config: &mut Config) -> Verdict {
        if let Some(e) = self.providers.declared().problem(config) {
            return Verdict::Invalid(e);
        }
        match self.catalog.place(&*self.ports.compute, config, self.now()).await {
            Verdict::Valid => {}
            not => return not,
        }
        match self.providers.get(&self.env, &config.provider).await {
            Ok(p) => p.validate(&self.env, config).await,
            Err(e) => Verdict::Unknown(e.to_string()),
        }
    }

    /// One VM; a record that does not decode is quarantined and reads as absent
    /// ([`crate::records::writes::read_vm`]).
    pub async fn vm(&self, id: &str) -> Result<Option<Versioned<Vm>>, TaskError> {
        crate::records::writes::read_vm(&self.env, id).await
    }
}
