//! Unit tests of `ports/bots.rs`.

use super::*;

#[test]
fn grpc_codes_are_classified_once_here() {
    let k = BotErrorKind::from_grpc;
    assert_eq!(k(5), BotErrorKind::NotFound);
    for c in [2, 4, 13, 14] {
        assert_eq!(k(c), BotErrorKind::Unavailable, "{c}");
    }
    assert_eq!(k(8), BotErrorKind::RateLimited);
    assert_eq!((k(7), k(16)), (BotErrorKind::Denied, BotErrorKind::Denied));
    assert_eq!((k(3), k(12)), (BotErrorKind::Invalid, BotErrorKind::Invalid));
    assert!(BotError::grpc(5, "gone").is_not_found());
    assert_eq!(BotError::grpc(14, "down").to_string(), "swarming Unavailable: code 14: down");
}
