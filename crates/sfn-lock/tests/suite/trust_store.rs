//! The HTTPS client's trust store (src/https.rs), against a real TLS server on
//! 127.0.0.1 whose certificate comes from a throwaway CA made with the
//! `openssl` CLI: the built-in roots do not trust it; `SSL_CERT_FILE`,
//! `SSL_CERT_DIR` or `AWS_CA_BUNDLE` naming that CA makes it trusted; a bundle
//! that is missing or holds no certificate is a typed error, logged once at init.
//!
//! The variables are process-wide, so every case runs in a child process: this
//! test binary again, running only `child` with `TRUST_STORE_CHILD` set and an
//! environment of its own. The server is Python's `ssl` + `http.server`,
//! answering every request with a DynamoDB error: an answer of any kind means
//! the handshake succeeded.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use sfn_lock::aws::config::sdk_config;
use sfn_lock::lambda::{init_logging, locker_from_env};

const SERVER: &str = r#"
import http.server, os, ssl, sys, threading
class Answer(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = b'{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"answered over TLS"}'
        self.send_response(400)
        self.send_header("content-type", "application/x-amz-json-1.0")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[1], sys.argv[2])
server.socket = context.wrap_socket(server.socket, server_side=True)
# Ends with the test: its stdin is the test's pipe.
threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// A CA, a certificate it signed for 127.0.0.1, and a TLS server presenting it.
struct Server {
    dir: PathBuf,
    endpoint: String,
    process: Child,
}

impl Server {
    fn start() -> Server {
        static SERVERS: AtomicUsize = AtomicUsize::new(0);
        let n = SERVERS.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("sfn-lock-trust-{}-{n}", std::process::id()));
        std::fs::create_dir_all(dir.join("ca-dir")).expect("temp dir");
        let openssl = |args: &[&str]| {
            let done = Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .output()
                .expect("these tests need the openssl CLI");
            assert!(
                done.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&done.stderr)
            );
        };
        let key = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509"],
                &key[..],
                &[
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.pem",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=sfn-lock test CA",
                ],
            ]
            .concat(),
        );
        openssl(
            &[
                &["req", "-x509"],
                &key[..],
                &[
                    "-keyout",
                    "other.key",
                    "-out",
                    "other.pem",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=another CA",
                ],
            ]
            .concat(),
        );
        openssl(
            &[
                &["req"],
                &key[..],
                &[
                    "-keyout",
                    "server.key",
                    "-out",
                    "server.csr",
                    "-subj",
                    "/CN=127.0.0.1",
                ],
            ]
            .concat(),
        );
        std::fs::write(
            dir.join("server.ext"),
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        )
        .expect("write");
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ]);
        std::fs::copy(dir.join("ca.pem"), dir.join("ca-dir/ca.pem")).expect("copy");
        std::fs::write(dir.join("empty.pem"), "no certificate here\n").expect("write");
        let mut process = Command::new("python3")
            .args(["-c", SERVER])
            .arg(dir.join("server.pem"))
            .arg(dir.join("server.key"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("these tests need python3");
        let mut port = String::new();
        BufReader::new(process.stdout.take().expect("stdout"))
            .read_line(&mut port)
            .expect("the server's port");
        let endpoint = format!("https://127.0.0.1:{}", port.trim());
        Server {
            dir,
            endpoint,
            process,
        }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// Runs `mode` in a child with `vars` as its only trust-store variables;
    /// its `RESULT` line, and the lines it logged about the trust store.
    fn child(&self, mode: &str, vars: &[(&str, &str)]) -> (String, usize) {
        let mut command = Command::new(std::env::current_exe().expect("test binary"));
        command.args([
            "trust_store::child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ]);
        for name in [
            "AWS_CA_BUNDLE",
            "SSL_CERT_FILE",
            "SSL_CERT_DIR",
            "AWS_LAMBDA_LOG_FORMAT",
            "HTTPS_PROXY",
            "https_proxy",
            "HTTP_PROXY",
            "http_proxy",
            "ALL_PROXY",
            "all_proxy",
            "NO_PROXY",
            "no_proxy",
        ] {
            command.env_remove(name);
        }
        command.envs(vars.iter().copied()).envs([
            ("TRUST_STORE_CHILD", mode),
            ("TRUST_STORE_ENDPOINT", self.endpoint.as_str()),
            ("LOCK_TABLE_NAME", "locks"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
        ]);
        let output = command.output().expect("run the child");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "child {mode} {vars:?} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let result = stdout
            .lines()
            .find_map(|line| line.split_once("RESULT ").map(|(_, result)| result))
            .unwrap_or_else(|| panic!("no RESULT line:\n{stdout}"));
        let logged = stdout
            .lines()
            .filter(|line| {
                !line.contains("RESULT")
                    && line.contains("misconfigured")
                    && line.contains("trust store")
            })
            .count();
        (result.to_owned(), logged)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What runs in the child: `call` sends one DynamoDB request through
/// `sdk_config()`'s client; `init` builds the function's locker as at a cold start.
#[tokio::test]
async fn child() {
    let Ok(mode) = std::env::var("TRUST_STORE_CHILD") else {
        return; // the normal run: nothing to do here
    };
    let result = match mode.as_str() {
        "call" => {
            let endpoint = std::env::var("TRUST_STORE_ENDPOINT").expect("endpoint");
            let config = aws_sdk_dynamodb::config::Builder::from(&sdk_config().await)
                .endpoint_url(endpoint)
                .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
                .build();
            match aws_sdk_dynamodb::Client::from_conf(config)
                .list_tables()
                .send()
                .await
            {
                Ok(_) => "answered ok".to_owned(),
                Err(error) => match error.as_service_error() {
                    Some(service) => format!("answered {}", service.meta().code().unwrap_or("?")),
                    None => format!("failed {}", chain(&error)),
                },
            }
        }
        _ => {
            init_logging();
            match locker_from_env().await {
                Ok(_) => "init ok".to_owned(),
                Err(error) => format!("init {} {error}", error.error_type()),
            }
        }
    };
    println!("RESULT {result}");
}

fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

fn exists(path: &str) -> bool {
    Path::new(path).exists()
}

#[test]
fn a_bundle_variable_naming_the_ca_makes_its_server_trusted() {
    let server = Server::start();
    let (ca, dir) = (server.path("ca.pem"), server.path("ca-dir"));
    assert!(exists(&ca) && exists(&dir));
    for var in [
        ("SSL_CERT_FILE", ca.as_str()),
        ("AWS_CA_BUNDLE", ca.as_str()),
        ("SSL_CERT_DIR", dir.as_str()),
    ] {
        let (result, _) = server.child("call", &[var]);
        assert_eq!(result, "answered ResourceNotFoundException", "{var:?}");
    }
}

#[test]
fn without_a_bundle_variable_the_private_ca_is_refused() {
    let server = Server::start();
    // An empty variable counts as unset: the built-in roots, which do not hold this CA.
    for vars in [&[][..], &[("SSL_CERT_FILE", "")][..]] {
        let (result, _) = server.child("call", vars);
        assert!(result.starts_with("failed "), "{vars:?}: {result}");
        assert!(
            result.contains("certificate") && result.contains("UnknownIssuer"),
            "{vars:?}: {result}"
        );
    }
    // AWS_CA_BUNDLE replaces the other variables, as for the AWS CLI.
    let (result, _) = server.child(
        "call",
        &[
            ("AWS_CA_BUNDLE", &server.path("other.pem")),
            ("SSL_CERT_FILE", &server.path("ca.pem")),
        ],
    );
    assert!(result.contains("UnknownIssuer"), "{result}");
}

#[test]
fn a_bad_bundle_is_a_typed_error_logged_once_at_init() {
    let server = Server::start();
    let missing = server.path("missing.pem");
    let empty = server.path("empty.pem");
    for (var, path, says) in [
        ("SSL_CERT_FILE", &missing, "No such file"),
        ("AWS_CA_BUNDLE", &empty, "holds no PEM certificate"),
        ("SSL_CERT_DIR", &missing, "No such file"),
    ] {
        let (result, logged) = server.child("init", &[(var, path)]);
        assert!(
            result.starts_with("init LockStoreMisconfigured "),
            "{var}: {result}"
        );
        assert!(
            result.contains(&format!("{var}={path}")) && result.contains(says),
            "{var}: {result}"
        );
        assert_eq!(logged, 1, "{var}: logged once at init");
        // A client built anyway (the CLI's sdk_config) fails every call with that reason, not a panic.
        let (call, _) = server.child("call", &[(var, path)]);
        assert!(
            call.starts_with("failed ") && call.contains(says),
            "{var}: {call}"
        );
    }
}

#[test]
fn the_built_in_roots_are_mozillas_and_hold_amazon_trust_services() {
    // A new webpki-root-certs that drops one of the roots AWS endpoints chain
    // to fails here, not in a Region.
    let roots = sfn_lock::aws::https::built_in_roots();
    assert_eq!(roots.len(), webpki_root_certs::TLS_SERVER_ROOT_CERTS.len());
    assert!(roots.len() > 100, "Mozilla's whole set: {}", roots.len());
    for name in sfn_lock::aws::https::AMAZON_TRUST_SERVICES_ROOTS {
        let holding = roots
            .iter()
            .filter(|cert| cert.windows(name.len()).any(|b| b == name.as_bytes()));
        assert_eq!(holding.count(), 1, "{name}");
    }
}

/// A proxy that prints the first line of the first request it gets, then hangs up.
const RECORDING_PROXY: &str = r#"
import socket, sys
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
print(listener.getsockname()[1], flush=True)
connection, _ = listener.accept()
print("LINE", connection.makefile("rb").readline().decode().strip(), flush=True)
connection.close()
"#;

#[test]
fn a_proxy_named_in_https_proxy_carries_the_call() {
    // The SDK's default client honours HTTPS_PROXY/NO_PROXY; a client of our own
    // must too, or a user behind a proxy (who often needs a CA bundle as well)
    // could not reach AWS at all.
    let server = Server::start();
    let mut proxy = Command::new("python3")
        .args(["-c", RECORDING_PROXY])
        .stdout(Stdio::piped())
        .spawn()
        .expect("these tests need python3");
    let mut lines = BufReader::new(proxy.stdout.take().expect("stdout")).lines();
    let port = lines.next().expect("the proxy's port").expect("read");
    let proxy_url = format!("http://127.0.0.1:{}", port.trim());
    let (result, _) = server.child(
        "call",
        &[
            ("SSL_CERT_FILE", &server.path("ca.pem")),
            ("HTTPS_PROXY", &proxy_url),
        ],
    );
    // A proxy the child never called is still waiting: this line ends it.
    let port: u16 = port.trim().parse().expect("the proxy's port");
    if let Ok(mut nudge) = std::net::TcpStream::connect(("127.0.0.1", port)) {
        let _ = std::io::Write::write_all(&mut nudge, b"NOT CALLED\n");
    }
    let seen = lines.next().expect("the proxy's line").expect("read");
    let _ = proxy.kill();
    let _ = proxy.wait();
    let target = server.endpoint.trim_start_matches("https://");
    assert_eq!(
        seen,
        format!("LINE CONNECT {target} HTTP/1.1"),
        "call: {result}"
    );
    assert!(result.starts_with("failed "), "the proxy hung up: {result}");
}
