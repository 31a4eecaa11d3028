//! `oversell`: parse, set up tracing, run the command, report the error.

/// mimalloc, not glibc's malloc: the shop allocates per request on every worker thread, and
/// glibc spent 40 % of its CPU in `_int_malloc`, `malloc_consolidate` and `free` at saturation
/// (docs/lab/lab-log.md, "redis-lua").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = oversell::cli::parse();
    oversell::telemetry::init_tracing(cli.verbosity.filter());
    let runtime = match oversell::cli::runtime(&cli) {
        Ok(rt) => rt,
        Err(e) => {
            oversell::console::write_stderr(
                format!("error: starting the async runtime: {e}\n").as_bytes(),
            );
            oversell::placement::give_back();
            std::process::exit(oversell::exit::Exit::Error.code());
        }
    };
    let code = runtime.block_on(async {
        match oversell::cli::run(cli).await {
            Ok(code) => code,
            Err(e) => {
                oversell::console::write_stderr(format!("error: {e:#}\n").as_bytes());
                oversell::cli::exit_code_for(&e)
            }
        }
    });
    oversell::placement::give_back();
    std::process::exit(code.code());
}
