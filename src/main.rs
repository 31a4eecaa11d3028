//! `oversell`: parse, set up tracing, run the command, report the error.

use clap::Parser;

#[tokio::main]
async fn main() {
    oversell::telemetry::init_tracing();
    let cli = oversell::cli::Cli::parse();
    let code = match oversell::cli::run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            oversell::cli::exit_code_for(&e)
        }
    };
    std::process::exit(code);
}
