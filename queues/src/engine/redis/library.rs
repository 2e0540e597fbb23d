//! The Redis Functions library of the queue engine: the prelude, then each operation's file of
//! `lua/` as a function, named after a hash of the whole source (so processes of different builds
//! sharing a Redis each call their own).

/// The operations of the library, each one file of `lua/`.
const OPS: [(&str, &str); 7] = [
    ("push", include_str!("../lua/push.lua")),
    ("take", include_str!("../lua/take.lua")),
    ("renew", include_str!("../lua/renew.lua")),
    ("finish", include_str!("../lua/finish.lua")),
    ("dead", include_str!("../lua/dead.lua")),
    ("list", include_str!("../lua/list.lua")),
    ("purge", include_str!("../lua/purge.lua")),
];

/// The Functions library: its name (after a hash of its code) and its source.
pub(super) struct Library {
    /// `gcebq_<hash>`: the prefix of its functions.
    pub(super) name: String,
    /// `#!lua name=…` and the prelude, then each operation as a function.
    pub(super) source: String,
}

/// The library of this build.
pub(super) static LIBRARY: std::sync::LazyLock<Library> = std::sync::LazyLock::new(|| {
    let mut body = String::from(include_str!("../lua/prelude.lua"));
    for (op, code) in OPS {
        body.push_str(&format!(
            "\nredis.register_function('{{LIB}}_{op}', function(KEYS, ARGV)\nbegin(KEYS, ARGV)\nlocal out = (function()\n{code}\nend)()\nsettle()\nreturn out\nend)\n"
        ));
    }
    // FNV-1a: stable across builds, so processes of one build agree on the name.
    let hash =
        body.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let name = format!("gcebq_{hash:016x}");
    let source = format!("#!lua name={name}\n{}", body.replace("{LIB}", &name));
    Library { name, source }
});
