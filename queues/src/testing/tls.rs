//! A CA and a server certificate for `127.0.0.1` made with `openssl` (what a managed Redis's
//! downloaded CA stands for in tests).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A CA (`ca`) and the server certificate and key it signed, for `127.0.0.1` and `localhost`.
#[derive(Debug, Clone)]
pub struct Certificates {
    /// The CA's certificate (PEM): what a client trusts.
    pub ca: PathBuf,
    /// The server's certificate (PEM).
    pub cert: PathBuf,
    /// The server's key (PEM).
    pub key: PathBuf,
}

impl Certificates {
    /// Makes a new CA and a server certificate in `dir`.
    pub fn make(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).expect("create the certificates' directory");
        let c = Self { ca: dir.join("ca.crt"), cert: dir.join("server.crt"), key: dir.join("server.key") };
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
        openssl(
            dir,
            &["req", "-x509"],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "2",
                "-subj",
                "/CN=gce-backend test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
        openssl(
            dir,
            &["req"],
            &ec,
            &["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"],
        );
        std::fs::write(
            dir.join("server.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
             keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
        )
        .expect("write the extensions");
        openssl(
            dir,
            &["x509", "-req"],
            &[],
            &[
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.crt",
                "-days",
                "2",
                "-extfile",
                "server.ext",
            ],
        );
        c
    }

    /// The arguments that make `redis-server` serve TLS with these certificates (clients need
    /// none of their own).
    pub fn server_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        for (flag, path) in
            [("--tls-cert-file", &self.cert), ("--tls-key-file", &self.key), ("--tls-ca-cert-file", &self.ca)]
        {
            args.push(flag.to_owned());
            args.push(path.display().to_string());
        }
        args.extend(["--tls-auth-clients", "no", "--tls-protocols", "TLSv1.2 TLSv1.3"].map(str::to_owned));
        args
    }
}

fn openssl(dir: &Path, head: &[&str], key: &[&str], tail: &[&str]) {
    let out = Command::new("openssl")
        .args(head)
        .args(key)
        .args(tail)
        .current_dir(dir)
        .output()
        .expect("openssl (install it, or run scripts/test)");
    assert!(out.status.success(), "openssl {head:?}: {}", String::from_utf8_lossy(&out.stderr));
}
