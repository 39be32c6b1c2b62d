//! `sfn-lock list` and `release --force` on the SSM store, as real processes
//! against the local stack (run under scripts/local-stack.sh). Parameter
//! Store's throughput is the account's and its reads may lag a write: the
//! listing is paced and says so, and a forced release that finds nothing
//! says what its answer rests on. The proxy in front of the server
//! (support/date_proxy.rs, its `Date` left as is) counts what reaches it.

mod support;

use std::collections::BTreeSet;
use std::process::{Command, Output};

use serde_json::Value;
use sfn_lock::aws::config::sdk_config;
use sfn_lock::{AcquireOutcome, AnyStore, EpochMillis, LeaseSeconds, LockName, LockStore, Owner};
use sfn_lock::{ReleaseOutcome, StoreUrl};
use support::date_proxy::DateProxy;
use support::{table_url, unique};

/// The CLI's progress interval (crates/sfn-lock-cli/src/ops/list.rs).
const PROGRESS_EVERY_REQUESTS: usize = 50;

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn ssm_url() -> String {
    format!("ssm:///sfn-lock-cli/{}", unique("ops"))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn store(url: &str) -> AnyStore {
    let url = StoreUrl::parse(url).unwrap();
    runtime().block_on(async { AnyStore::from_url(&url, &sdk_config().await).unwrap() })
}

fn name(text: &str) -> LockName {
    LockName::new(text).unwrap()
}

/// Grants `lock` to `owner` for ten minutes, as a workflow would.
fn hold(store: &AnyStore, lock: &str, owner: &str) {
    let lease = LeaseSeconds::new("leaseSeconds", 600).unwrap();
    let owner = Owner::new(owner).unwrap();
    let outcome = runtime()
        .block_on(store.acquire(&name(lock), &owner, lease, EpochMillis::now()))
        .unwrap();
    assert!(matches!(outcome, AcquireOutcome::Granted(_)), "{outcome:?}");
}

/// `sfn-lock ARGS --store URL`, every store's endpoint the proxy.
fn via(proxy: &DateProxy, url: &str, args: &[&str]) -> Output {
    let (subcommand, rest) = args.split_first().unwrap();
    Command::new(env!("CARGO_BIN_EXE_sfn-lock"))
        .args([subcommand, "--store", url])
        .args(rest)
        .env("AWS_ENDPOINT_URL_DYNAMODB", proxy.url())
        .env("AWS_ENDPOINT_URL_S3", proxy.url())
        .env("AWS_ENDPOINT_URL_SSM", proxy.url())
        .output()
        .unwrap()
}

/// The number just before `word` in the one stderr line starting `prefix`.
fn number_before(stderr: &str, prefix: &str, word: &str) -> usize {
    let line = stderr
        .lines()
        .find(|line| line.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in {stderr}"));
    let before = line.split_once(&format!(" {word}")).unwrap().0;
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Every request the listing sends goes through the pacer: the requests it
/// counts (and sums up on stderr) are the requests that reach the server.
/// The pacer's rate is its own tests' (crates/sfn-lock/src/listing_pace_tests.rs).
#[test]
fn an_ssm_listing_says_how_long_shows_progress_and_paces_every_request_it_sends() {
    let url = ssm_url();
    let ssm = store(&url);
    let locks: BTreeSet<String> = (0..24).map(|n| format!("job {n:02}")).collect();
    for lock in &locks {
        hold(&ssm, lock, &format!("arn:exec:{}", lock.replace(' ', "-")));
    }
    let proxy = DateProxy::start(0);
    let out = via(&proxy, &url, &["list", "--json"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");

    let listing: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(listing["truncated"], false);
    let listed: BTreeSet<String> = listing["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|lock| lock["lockName"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, locks, "every held lock is listed");

    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("sfn-lock: listing up to 100 locks on SSM at 5 requests a second")
            && first.contains("up to about 46 s"),
        "says up front how long: {err}"
    );
    let sent = proxy.requests();
    assert!(
        sent.iter().all(|request| request.contains("AmazonSSM.")),
        "{sent:?}"
    );
    let paced = number_before(&err, "sfn-lock: listed: ", "requests");
    assert_eq!(paced, sent.len(), "paced vs at the wire: {err}\n{sent:#?}");
    let reads = sent.iter().filter(|r| !r.ends_with("GetParametersByPath"));
    assert_eq!(reads.count(), 2 * locks.len(), "{sent:#?}");
    assert!(
        paced >= PROGRESS_EVERY_REQUESTS,
        "{paced} requests: too few"
    );
    let progress = err.lines().filter(|l| l.starts_with("sfn-lock: listing: "));
    assert_eq!(progress.count(), paced / PROGRESS_EVERY_REQUESTS, "{err}");
}

/// SSM's reads may lag a write: a forced release that finds nothing says
/// its answer is a read's, and writes nothing. DynamoDB's and S3's reads
/// are strongly consistent: their answer stays plain.
#[test]
fn release_force_that_finds_nothing_on_ssm_says_it_rests_on_a_read_and_writes_nothing() {
    let url = ssm_url();
    let ssm = store(&url);
    // One lock never taken; one taken and released (it has generations).
    hold(&ssm, "was held", "arn:exec:done");
    let done = Owner::new("arn:exec:done").unwrap();
    let released = runtime().block_on(ssm.release(&name("was held"), &done, EpochMillis::now()));
    assert_eq!(released.unwrap(), ReleaseOutcome::Released);
    hold(&ssm, "held", "arn:exec:real");
    let proxy = DateProxy::start(0);
    for lock in ["never taken", "was held"] {
        let out = via(&proxy, &url, &["release", "--force", lock]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(
            stdout(&out),
            format!(
                "{lock:?} is not held as read just now: nothing to free (SSM's reads can lag \
                 a write by seconds: run again to be sure)\n"
            )
        );
    }
    let out = via(
        &proxy,
        &url,
        &["release", "--force", "--owner", "arn:exec:typo", "held"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("arn:exec:typo does not hold \"held\" as read just now")
            && stderr(&out).contains("held by arn:exec:real")
            && stderr(&out).contains("run again to be sure"),
        "{}",
        stderr(&out)
    );
    let writes: Vec<String> = proxy
        .requests()
        .into_iter()
        .filter(|r| r.contains("PutParameter") || r.contains("DeleteParameter"))
        .collect();
    assert_eq!(writes, Vec::<String>::new(), "nothing is written");

    let bucket = std::env::var("SFN_LOCK_BUCKET").expect("SFN_LOCK_BUCKET: run under local-stack");
    for url in [table_url(), format!("s3://{bucket}/{}/", unique("cli-ops"))] {
        let lock = unique("never");
        let out = via(&proxy, &url, &["release", "--force", &lock]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(
            stdout(&out),
            format!("{lock:?} is not held: nothing to free\n")
        );
    }
}
