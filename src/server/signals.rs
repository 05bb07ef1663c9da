//! The process's signals, caught from before anything serves. A signal's
//! handler is installed when it is first asked for, and until then the
//! default action applies: SIGTERM and SIGHUP end the process at once.
//! pingora asks for its signals only when its main loop starts, after the
//! services have started serving, so a SIGTERM in those first moments
//! (a pod deleted right after it started) killed the process without a
//! drain, its open connections closed under their requests. [`Signals`]
//! asks for every signal the process handles before the listeners serve,
//! on a thread of its own, and hands them on: SIGTERM, SIGINT and SIGQUIT
//! to pingora's main loop ([`Stops`]), SIGHUP to the reload service.

use async_trait::async_trait;
use pingora_core::server::{ShutdownSignal, ShutdownSignalWatch};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// The signals the process handles, caught since [`Signals::catch`].
pub(super) struct Signals {
    /// The first of SIGTERM, SIGINT or SIGQUIT.
    pub(super) stops: Stops,
    /// How many SIGHUPs have arrived.
    pub(super) hangups: watch::Receiver<u64>,
}

/// pingora's shutdown signal, from the signals caught early.
pub(super) struct Stops(watch::Receiver<Option<Stop>>);

/// Which shutdown a signal asks for.
#[derive(Clone, Copy, Debug)]
enum Stop {
    /// SIGTERM: the drain.
    Terminate,
    /// SIGINT: at once.
    Interrupt,
    /// SIGQUIT: pingora's graceful upgrade.
    Upgrade,
}

impl Signals {
    /// Installs the handlers (returning once they are in place) and starts
    /// the thread that hands the signals on.
    pub(super) fn catch() -> std::io::Result<Signals> {
        let (stop_tx, stops) = watch::channel(None);
        let (hangup_tx, hangups) = watch::channel(0u64);
        let (installed_tx, installed) = std::sync::mpsc::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("tensorgate-signals".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let asked = (|| {
                        let term = signal(SignalKind::terminate())?;
                        let int = signal(SignalKind::interrupt())?;
                        let quit = signal(SignalKind::quit())?;
                        let hup = signal(SignalKind::hangup())?;
                        std::io::Result::Ok((term, int, quit, hup))
                    })();
                    let (mut term, mut int, mut quit, mut hup) = match asked {
                        Ok(streams) => {
                            let _ = installed_tx.send(Ok(()));
                            streams
                        }
                        Err(error) => {
                            let _ = installed_tx.send(Err(error));
                            return;
                        }
                    };
                    loop {
                        let stop = tokio::select! {
                            _ = term.recv() => Stop::Terminate,
                            _ = int.recv() => Stop::Interrupt,
                            _ = quit.recv() => Stop::Upgrade,
                            _ = hup.recv() => {
                                hangup_tx.send_modify(|n| *n += 1);
                                continue;
                            }
                        };
                        // The first stop counts; pingora asks once.
                        stop_tx.send_if_modified(|first| {
                            let unset = first.is_none();
                            if unset {
                                *first = Some(stop);
                            }
                            unset
                        });
                    }
                })
            })?;
        installed
            .recv()
            .map_err(|_| std::io::Error::other("the signal thread ended"))??;
        Ok(Signals {
            stops: Stops(stops),
            hangups,
        })
    }
}

#[async_trait]
impl ShutdownSignalWatch for Stops {
    async fn recv(&self) -> ShutdownSignal {
        let mut stops = self.0.clone();
        let stop = stops.wait_for(Option::is_some).await.map(|stop| *stop);
        let Ok(stop) = stop else {
            // The signal thread is gone: no signal will come.
            return std::future::pending().await;
        };
        match stop {
            Some(Stop::Interrupt) => ShutdownSignal::FastShutdown,
            Some(Stop::Upgrade) => ShutdownSignal::GracefulUpgrade,
            Some(Stop::Terminate) | None => ShutdownSignal::GracefulTerminate,
        }
    }
}
