//! The CLI's tests' set-up: the binary pointed at the local stack's lock
//! table, the library to hold or look at a lock beside it, scratch files the
//! commands under test write, and a proxy to take the store away.
#![allow(dead_code)] // each test file uses a different part

pub mod date_proxy;
pub mod losing_proxy;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sfn_lock::aws::config::sdk_config;
use sfn_lock::{
    AcquireOutcome, DynamoStore, EpochMillis, LeaseSeconds, LockName, LockStore, Owner,
};

pub fn table_url() -> String {
    let table = std::env::var("SFN_LOCK_TABLE")
        .expect("SFN_LOCK_TABLE: run the CLI tests under scripts/local-stack.sh (make test)");
    format!("dynamodb://{table}")
}

/// The CLI with `args`, its store the stack's table (`--store` after `run`).
pub fn cli(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sfn-lock"));
    // A group of its own: a test that gives up kills the CLI and its command.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let (first, rest) = args.split_first().expect("a subcommand");
    command
        .arg(first)
        .args(["--store", &table_url()])
        .args(rest);
    command
}

pub trait StatusCode {
    fn status_code(self) -> i32;
}

impl StatusCode for Command {
    fn status_code(mut self) -> i32 {
        self.status()
            .unwrap()
            .code()
            .expect("exited, not signalled")
    }
}

pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let next = NEXT.fetch_add(1, Ordering::SeqCst);
    format!("{prefix}-{}-{nanos}-{next}", std::process::id())
}

pub fn millis_now() -> i64 {
    EpochMillis::now().0
}

/// A fresh directory for one test's files.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique(&format!("sfn-lock-cli-{name}")));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The file's first line, once a command has written it (up to 60 s: a
/// command that never writes fails the test instead of hanging it).
pub fn read_when_written(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text.trim().to_string();
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never written",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) on a pid this test started.
    let sent = unsafe { libc::kill(pid as i32, signal) };
    assert_eq!(sent, 0, "kill {pid}");
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

fn store() -> DynamoStore {
    let table = table_url().trim_start_matches("dynamodb://").to_string();
    block_on(async { DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk_config().await), table) })
}

/// Grants `lock` to `owner` for `seconds`, as another process would.
pub fn hold(lock: &str, owner: &str, seconds: i64) {
    let outcome = block_on(store().acquire(
        &LockName::new(lock).unwrap(),
        &Owner::new(owner).unwrap(),
        LeaseSeconds::new("leaseSeconds", seconds).unwrap(),
        EpochMillis::now(),
    ))
    .unwrap();
    assert!(matches!(outcome, AcquireOutcome::Granted(_)), "{outcome:?}");
}

/// Who holds `lock` and with which token: asked as a rival would, so a free
/// lock is taken for an instant and released again.
pub fn holder_of(lock: &str) -> Option<(String, u64)> {
    let (store, lock) = (store(), LockName::new(lock).unwrap());
    let probe = Owner::new(unique("arn:probe")).unwrap();
    let lease = LeaseSeconds::new("leaseSeconds", 1).unwrap();
    block_on(async {
        match store
            .acquire(&lock, &probe, lease, EpochMillis::now())
            .await
            .unwrap()
        {
            AcquireOutcome::Held(held) => held
                .holders
                .first()
                .map(|h| (h.owner.clone(), h.fencing_token)),
            _ => {
                store
                    .release(&lock, &probe, EpochMillis::now())
                    .await
                    .unwrap();
                None
            }
        }
    })
}

/// A TCP proxy to the stack's DynamoDB that can be taken away: `stop`
/// closes every connection and the listener (new ones are refused).
pub struct Proxy {
    address: String,
    stopped: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    pub fn start() -> Proxy {
        let upstream = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
            .unwrap()
            .trim_start_matches("http://")
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let (stopped, open) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(Mutex::new(Vec::new())),
        );
        let (stop, conns) = (stopped.clone(), open.clone());
        std::thread::spawn(move || {
            for caller in listener.incoming() {
                let Ok(caller) = caller else { continue };
                if stop.load(Ordering::SeqCst) {
                    return; // drops the listener: new connections are refused
                }
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                for stream in [&caller, &server] {
                    conns.lock().unwrap().push(stream.try_clone().unwrap());
                }
                pipe(caller.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, caller);
            }
        });
        Proxy {
            address,
            stopped,
            open,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        // Wake the accept loop so that it sees `stopped` and drops the listener.
        let _ = TcpStream::connect(&self.address);
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buffer = [0_u8; 16 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buffer) {
            if to.write_all(&buffer[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}

/// Waits for `child` up to 60 s; past that kills it, with its command (its
/// process group, see [`cli`]), and fails the test: a CLI that never stops
/// its command must fail the suite, not hang it or leave the command behind.
pub fn wait_at_most(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            // SAFETY: kill(2) on the process group this test started.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            panic!("the CLI (pid {}) did not exit within 60 s", child.id());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
