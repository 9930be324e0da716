//! The `lockwarden` binary.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use lockwarden::config::{self, Cli, Command};
use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc's malloc: a request allocates and frees many small buffers on
/// whichever worker runs it, which costs glibc's arenas a sizeable share of the service's
/// CPU (BENCHMARKS.md, "The ZooKeeper transport on tokio, and mimalloc").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How long the runtime waits for background tasks to stop once the work is done.
const SHUTDOWN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = match &cli.command {
        Command::Serve(args) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(args.request_threads());
            builder
        }
        // The relay stands for the HTTP hop of the service, so it runs as the service does by
        // default. (Not from `ServeArgs`: the service's environment variables are not the
        // relay's to read, and a bad one would stop it.)
        Command::BenchRelay(_) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(config::default_request_threads());
            builder
        }
        // The benchmark's client is one event loop: it shares the machine with the service
        // and ZooKeeper, and threads of its own would take CPU from what it measures. A
        // client command is one small event loop too.
        Command::Bench(_) | Command::Client(_) => tokio::runtime::Builder::new_current_thread(),
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("lockwarden: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => lockwarden::server::serve(args, shutdown_signal())
                .await
                .map(|()| 0),
            Command::Bench(args) => lockwarden::bench::run(args).await.map(|_| 0),
            Command::BenchRelay(args) => lockwarden::bench::relay::serve(args, shutdown_signal())
                .await
                .map(|()| 0),
            Command::Client(command) => Ok(lockwarden::cli::run(command).await),
        }
    });
    // The answer is given (the server has drained): no background task, whatever it is
    // doing, may hold the exit up. Each is stopped at its next await; a worker still busy
    // after this is left behind.
    runtime.shutdown_timeout(SHUTDOWN_TIMEOUT);
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("lockwarden: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
