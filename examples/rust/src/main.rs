//! logitcheck-harness: a reference engine harness for logitcheck's process protocol
//! (docs/protocol.md). It answers the handshake, then serves calls on stdin/stdout until QUIT or
//! end of input. Logs go to stderr.

mod api;
mod args;
mod candidates;
mod chain;
mod error;
mod ops;
mod protocol;
mod samplers;

use std::io::{self, BufReader, BufWriter, Write};
use std::process::ExitCode;

use protocol::{read_header, read_request, write_error, write_handshake, write_results, Request};

const NAME: &str = "rust-reference";

fn bugs() -> Vec<&'static str> {
    let mut on = Vec::new();
    if cfg!(feature = "bug_top_p_on_logits") { on.push("bug_top_p_on_logits"); }
    if cfg!(feature = "bug_softmax_top1000") { on.push("bug_softmax_top1000"); }
    if cfg!(feature = "bug_temp_misplaced") { on.push("bug_temp_misplaced"); }
    if cfg!(feature = "bug_top_p_stale_softmax") { on.push("bug_top_p_stale_softmax"); }
    if cfg!(feature = "bug_rope_restart") { on.push("bug_rope_restart"); }
    on
}

fn serve() -> io::Result<ExitCode> {
    let mut input = BufReader::with_capacity(1 << 20, io::stdin().lock());
    let mut output = BufWriter::with_capacity(1 << 20, io::stdout().lock());

    match read_header(&mut input) {
        Ok(Some(line)) if protocol::greeting(&line).is_some() => {}
        Ok(Some(line)) => {
            eprintln!("logitcheck-harness: unexpected greeting {line:?}");
            return Ok(ExitCode::from(2));
        }
        Ok(None) => return Ok(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("logitcheck-harness: bad greeting: {}", e.0);
            return Ok(ExitCode::from(2));
        }
    }
    let on = bugs();
    let name = if on.is_empty() { NAME.to_string() } else { format!("{NAME}+{}", on.join("+")) };
    write_handshake(&mut output, &name, api::FUNCTIONS, api::CLAIMS)?;

    loop {
        let request = match read_request(&mut input) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(ExitCode::SUCCESS),
            Err(e) => {
                eprintln!("logitcheck-harness: malformed request: {}", e.0);
                return Ok(ExitCode::from(2));
            }
        };
        match request {
            Request::Quit => return Ok(ExitCode::SUCCESS),
            Request::Call { function, args } => {
                let args = args::Args::new(args);
                // a panic is a bug of this harness, reported as such; the process stays usable
                let answer = std::panic::catch_unwind(|| api::call(&function, &args))
                    .unwrap_or_else(|_| Err(error::Error::Failed(format!("internal error (panic) in {function}"))));
                match answer {
                    Ok(results) => write_results(&mut output, &results)?,
                    Err(err) => write_error(&mut output, &err)?,
                }
            }
        }
        output.flush()?;
    }
}

fn main() -> ExitCode {
    match serve() {
        Ok(code) => code,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("logitcheck-harness: i/o error: {e}");
            ExitCode::from(1)
        }
    }
}
