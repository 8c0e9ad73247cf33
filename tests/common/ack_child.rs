//! A child process for the kill harnesses (`tests/crash_library.rs`, `tests/sync/crash.rs`): this test binary
//! run as one ignored test, which prints `ACK:<line>` after each write returns. The parent kills it with SIGKILL
//! and reads the acknowledgements it printed whole.
#![allow(dead_code)]

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::Duration;

/// A running child and its acknowledgements.
pub struct AckChild {
    child: Child,
    acks: Receiver<String>,
    reader: JoinHandle<()>,
}

impl AckChild {
    /// Runs the ignored test `test` of this binary with `env`; waits until it acknowledges `OPEN` (at most 60 s).
    pub fn start(test: &str, env: &[(&str, String)]) -> AckChild {
        let exe = std::env::current_exe().expect("test binary");
        let mut cmd = Command::new(exe);
        cmd.args(["--ignored", "--exact", test, "--nocapture", "--test-threads=1"]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("start the child");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, acks) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            let mut r = std::io::BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                // Only whole lines count: one cut short by the kill lacks its newline.
                match r.read_until(b'\n', &mut line) {
                    Ok(n) if n > 0 && line.ends_with(b"\n") => {
                        let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                        // libtest prints its own words on the same stream; the marker finds ours.
                        if let Some((_, ack)) = text.split_once("ACK:")
                            && tx.send(ack.to_string()).is_err()
                        {
                            break;
                        }
                    }
                    _ => break,
                }
            }
        });
        let opened = acks.recv_timeout(Duration::from_secs(60));
        assert!(opened.as_deref().is_ok_and(|l| l == "OPEN"), "{test}: the child did not open its store");
        AckChild { child, acks, reader }
    }

    /// Kills the child with SIGKILL; the acknowledgements it printed whole after `OPEN`.
    pub fn kill(mut self) -> Vec<String> {
        self.child.kill().expect("SIGKILL");
        let _ = self.child.wait();
        let _ = self.reader.join();
        self.acks.try_iter().collect()
    }
}
