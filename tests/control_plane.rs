//! Issue 42: the control plane under slow and hostile input.
//!
//! - token and TLS files (`--http-token-file`, `token_file`,
//!   `read_token_file`, `tls_cert`, `tls_key`, and the clients' `--token-file`
//!   and `--tls-ca`) must be regular files under a size cap: a FIFO, a device
//!   or a huge file is refused at once in one line, exit 78, by `run` and by
//!   `validate` (which checks them too: a missing token file validated);
//! - validation with thousands of unknown `from` names is linear, and its
//!   output is a screenful per kind of error.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::http::TOPOLOGY;
use crate::util::{require_tool, Output, SquallCommand, Workspace};

/// EX_CONFIG.
const EXIT_CONFIG: i32 = 78;
/// Every refusal here is immediate; a hang is a failure, found quickly.
const QUICK: Duration = Duration::from_secs(20);

/// A FIFO at `path`.
fn mkfifo(path: &Path) -> PathBuf {
    let c_path = std::ffi::CString::new(path.display().to_string()).expect("no NUL");
    // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0, "mkfifo");
    path.to_path_buf()
}

/// `path` as a TOML string.
fn quoted(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

/// `cmd` under 1 GiB of address space (when `prlimit` is there): a build
/// that reads `/dev/zero` whole fails in seconds instead of taking the
/// machine's memory (it grew at 1.4 GB/s).
fn bounded(cmd: &mut SquallCommand) -> &mut SquallCommand {
    if let Some(prlimit) = require_tool("prlimit") {
        cmd.wrapped([prlimit.into_os_string(), "--as=1073741824".into(), "--".into()]);
    }
    cmd.limit(QUICK)
}

/// Asserts exit 78 and one error line that names `what` at `path` and says `want`.
#[track_caller]
fn assert_refused(out: &Output, what: &str, path: &Path, want: &str) {
    out.assert_code(EXIT_CONFIG);
    let line = out.single_error_line();
    let expected = format!("{what} {} {want}", path.display());
    assert!(line.contains(&expected), "expected {expected:?}\n{}", out.context());
}

/// Item 4. Each file the control plane reads is refused unless it is a
/// regular file under its cap, in one line, exit 78, before anything runs:
/// by `run` (a FIFO hung it, `/dev/zero` grew it at 1.4 GB/s) and by
/// `validate` (which did not read them: exit 0), and by the clients.
#[test]
fn token_and_tls_files_must_be_small_regular_files() {
    let ws = Workspace::new("control_files");
    let fifo = mkfifo(&ws.path("token.fifo"));
    let zero = PathBuf::from("/dev/zero");
    let big = ws.write("big.pem", vec![b'A'; 2 << 20]);
    let junk_key = ws.write("junk.key", "not a key\n");
    let too_large = "is too large (2097152 bytes; at most";
    let bad: [(&Path, &str); 3] = [
        (&fifo, "is a FIFO (named pipe), not a regular file"),
        (&zero, "is a character device, not a regular file"),
        (&big, too_large),
    ];
    let plain = ws.write_topology("plain.toml", TOPOLOGY);

    // On the command line.
    for (path, want) in bad {
        let mut run = SquallCommand::run(&ws, &plain, "30s");
        run.args(["--http", "0", "--http-token-file"]).arg(path);
        assert_refused(&bounded(&mut run).output(), "the token file", path, want);
    }

    // In [topology.http], for `validate` and for `run`.
    let keys = [
        ("token_file", "the token file", String::new()),
        ("read_token_file", "the token file", String::new()),
        ("tls_cert", "the TLS certificate", format!("tls_key = {}\n", quoted(&junk_key))),
    ];
    for (key, what, extra) in &keys {
        for (path, want) in bad {
            let toml = format!("{TOPOLOGY}\n[topology.http]\n{key} = {}\n{extra}", quoted(path));
            let topology = ws.write_topology("web.toml", &toml);
            let mut validate = SquallCommand::validate(&ws, &topology);
            assert_refused(&bounded(&mut validate).output(), what, path, want);
            let mut run = SquallCommand::run(&ws, &topology, "30s");
            run.args(["--http", "0"]);
            assert_refused(&bounded(&mut run).output(), what, path, want);
        }
    }
    // The key, after a certificate that is fine.
    if let Some((cert, _)) = crate::tls::self_signed(&ws, "squall-files") {
        for (path, want) in bad {
            let toml = format!(
                "{TOPOLOGY}\n[topology.http]\ntls_cert = {}\ntls_key = {}\n",
                quoted(&cert),
                quoted(path)
            );
            let topology = ws.write_topology("web.toml", &toml);
            let mut validate = SquallCommand::validate(&ws, &topology);
            assert_refused(&bounded(&mut validate).output(), "the TLS key", path, want);
        }
    }

    // A token file that is not there: validate says so (it said valid).
    let toml = format!("{TOPOLOGY}\n[topology.http]\ntoken_file = \"missing.token\"\n");
    let topology = ws.write_topology("web.toml", &toml);
    let mut validate = SquallCommand::validate(&ws, &topology);
    let missing = ws.path("missing.token");
    assert_refused(&bounded(&mut validate).output(), "the token file", &missing, "does not exist");
    // With the file, the same topology validates.
    ws.write("missing.token", "t0ken\n");
    SquallCommand::validate(&ws, &topology).output().assert_code(0);

    // The clients: `squall tap` and `squall top` read a token file, and a CA file.
    for (path, want) in bad {
        let mut tap = SquallCommand::new(&ws, ["tap", "9", "--outputs-of", "source"]);
        tap.arg("--token-file").arg(path);
        assert_refused(&bounded(&mut tap).output(), "the token file", path, want);
        let mut tap = SquallCommand::new(&ws, ["tap", "9", "--outputs-of", "source"]);
        tap.arg("--tls-ca").arg(path);
        assert_refused(&bounded(&mut tap).output(), "the CA file", path, want);
    }
}

/// Item 6. `validate` of 12,000 bolts reading from components that do not
/// exist, and of one bolt with 300,000 duplicate inputs: a screenful of
/// errors of each kind and one line with how many more. They printed
/// 12,004 lines (after 33 s: a "did you mean" against every name for every
/// error; the unit test `unknown_from_names_cost_linear_work` counts that
/// work) and 300,001 lines (35.6 MB).
#[test]
fn thousands_of_bad_inputs_print_a_screenful_of_errors() {
    let ws = Workspace::new("many_bad_inputs");
    let mut text = String::from(
        "[plugins]\ntestkit = \"{testkit}\"\n\n[spouts.source]\ncomponent = \"testkit::ConstSpout\"\n",
    );
    for i in 0..12_000 {
        text.push_str(&format!(
            "\n[bolts.b{i}]\ncomponent = \"testkit::NullBolt\"\ninputs = [{{ from = \"gone{i}\" }}]\n"
        ));
    }
    let unknown = ws.write_topology("unknown.toml", &text);
    let inputs = vec!["{ from = \"source\" }"; 300_000].join(", ");
    let duplicates = ws.write_topology(
        "duplicates.toml",
        &format!(
            "[plugins]\ntestkit = \"{{testkit}}\"\n\n[spouts.source]\ncomponent = \"testkit::ConstSpout\"\n\n\
             [bolts.b]\ncomponent = \"testkit::NullBolt\"\ninputs = [{inputs}]\n"
        ),
    );
    for (topology, more) in [
        (
            &unknown,
            "and 11980 more errors like 'unknown spout or bolt \"…\" in inputs of bolt \"…\"'",
        ),
        (
            &duplicates,
            "and 299979 more errors like 'bolt \"…\" subscribes to stream \"…\" of \"…\" twice'",
        ),
    ] {
        let mut validate = SquallCommand::validate(&ws, topology);
        validate.limit(Duration::from_secs(120));
        let out = validate.output();
        out.assert_code(EXIT_CONFIG);
        let lines = out.stderr.lines().count();
        assert!(lines <= 3 * 21, "{lines} lines:\n{}", crate::util::tail(&out.stderr, 30));
        assert!(out.stderr.contains(more), "{}", crate::util::tail(&out.stderr, 30));
        assert!(out.stderr.len() < 64 * 1024, "{} bytes", out.stderr.len());
    }
}
