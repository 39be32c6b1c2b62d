//! The global `--store` and its default from LOCK_STORE_URL (read by clap),
//! `status --exit-code` for scripts, and `completions`. Real processes
//! against the local stack (scripts/local-stack.sh, as `make test` does).

mod support;

use std::process::{Command, Output};

use support::{hold, table_url, unique};

/// The CLI with no `--store`: its store only from the environment given.
fn bare(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sfn-lock"));
    command
        .args(args)
        .env_remove("LOCK_STORE_URL")
        .env_remove("LOCK_TABLE_NAME");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

fn said(output: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn the_store_comes_from_lock_store_url_or_a_global_store_flag() {
    let lock = unique("cli-env-store");
    hold(&lock, "arn:exec:env", 600);
    let url = table_url();
    // From the environment, through clap's `env`, in every subcommand.
    for args in [
        &["status", lock.as_str()][..],
        &["list", "--max", "1000"],
        &["run", "-n", "-x", lock.as_str(), "--", "false"],
    ] {
        let out = bare(args, &[("LOCK_STORE_URL", &url)]);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", said(&out));
    }
    let out = bare(&["status", &lock], &[("LOCK_STORE_URL", &url)]);
    assert!(said(&out).contains("arn:exec:env"), "{}", said(&out));
    // The flag wins over the environment, before or after the subcommand.
    let bad = [("LOCK_STORE_URL", "ftp://nowhere")];
    for args in [
        &["--store", url.as_str(), "status", lock.as_str()][..],
        &["status", "--store", url.as_str(), lock.as_str()],
        &["status", lock.as_str(), "--store", url.as_str()],
    ] {
        let out = bare(args, &bad);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", said(&out));
    }
    // A store in the environment that nobody can use: status 1, naming it.
    let out = bare(&["status", &lock], &bad);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(said(&out).contains("LOCK_STORE_URL"), "{}", said(&out));
    // An empty LOCK_STORE_URL is unset, as before: LOCK_TABLE_NAME's table.
    let table = url.trim_start_matches("dynamodb://");
    let out = bare(
        &["status", &lock],
        &[("LOCK_STORE_URL", ""), ("LOCK_TABLE_NAME", table)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // Neither: status 1, saying what to set.
    let out = bare(&["status", &lock], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(said(&out).contains("LOCK_STORE_URL"), "{}", said(&out));
    // --help shows the variable clap reads.
    let help = bare(&["status", "--help"], &[]);
    assert!(
        said(&help).contains("[env: LOCK_STORE_URL"),
        "{}",
        said(&help)
    );
}

#[test]
fn status_exit_code_is_0_when_held_3_when_free_and_plain_status_always_0() {
    let env = [("LOCK_STORE_URL", table_url())];
    let env: Vec<(&str, &str)> = env.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let lock = unique("cli-exit-code");
    let free = bare(&["status", "--exit-code", &lock], &env);
    assert_eq!(free.status.code(), Some(3), "{}", said(&free));
    assert!(said(&free).contains("free"), "{}", said(&free));
    let json = bare(&["status", "--exit-code", "--json", &lock], &env);
    assert_eq!(json.status.code(), Some(3), "{}", said(&json));
    assert!(said(&json).contains("\"held\":false"), "{}", said(&json));
    assert_eq!(bare(&["status", &lock], &env).status.code(), Some(0));

    hold(&lock, "arn:exec:held", 600);
    let held = bare(&["status", "--exit-code", &lock], &env);
    assert_eq!(held.status.code(), Some(0), "{}", said(&held));
    assert!(said(&held).contains("held by 1"), "{}", said(&held));
    assert_eq!(bare(&["status", &lock], &env).status.code(), Some(0));
    // A store failure is 1, never taken for "free".
    let out = bare(
        &["status", "--exit-code", &lock],
        &[("LOCK_STORE_URL", "ftp://nowhere")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
}

#[test]
fn completions_print_a_script_for_the_shell_from_the_same_flags() {
    let out = bare(&["completions", "bash"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(script.contains("complete -F _sfn__lock"), "{script}");
    for word in [
        "run",
        "status",
        "release",
        "wrap",
        "--nonblock",
        "--timeout",
        "--exit-code",
    ] {
        assert!(script.contains(word), "{word:?} missing:\n{script}");
    }
    // The deprecated spelling: clap_complete lists hidden flags too, so its
    // description says what it is.
    let zsh = bare(&["completions", "zsh"], &[]);
    let zsh = String::from_utf8_lossy(&zsh.stdout);
    assert!(zsh.contains("'--lock-name=[Deprecated"), "{zsh}");
    assert!(
        zsh.contains(":lock -- The lock every execution takes"),
        "{zsh}"
    );
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = bare(&["completions", shell], &[]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", said(&out));
        assert!(!out.stdout.is_empty(), "{shell}");
    }
}
