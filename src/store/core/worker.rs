//! One background-worker type for the store's threads (the HNSW builder, the community and PageRank
//! recompute, re-embedding): a named thread, a wake signal, a stop flag, and a join on stop or drop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The handle a worker's loop gets: wait for a wake-up, sleep in short steps, and see a stop request.
#[derive(Clone)]
pub(crate) struct Control {
    woken: Arc<(Mutex<bool>, Condvar)>,
    stop: Arc<AtomicBool>,
}

impl Control {
    /// True once the worker was asked to stop.
    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Wakes the worker (its next [`Control::wait`] returns at once).
    pub(crate) fn wake(&self) {
        let (lock, cv) = &*self.woken;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_one();
    }

    /// Waits until woken, stopped, or `timeout` passed, and clears the wake-up.
    pub(crate) fn wait(&self, timeout: Duration) {
        let (lock, cv) = &*self.woken;
        let mut woken = lock.lock().unwrap_or_else(|e| e.into_inner());
        if !*woken && !self.stopped() {
            woken = cv.wait_timeout(woken, timeout).map(|r| r.0).unwrap_or_else(|e| e.into_inner().0);
        }
        *woken = false;
    }

    /// Sleeps `d` in steps of 50 ms, so that a stop request is not held up; false when stopped meanwhile.
    pub(crate) fn sleep(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        while Instant::now() < until {
            if self.stopped() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50).min(until.saturating_duration_since(Instant::now())));
        }
        !self.stopped()
    }
}

/// A background thread; [`Worker::stop`] (or drop) asks it to stop and joins it.
pub(crate) struct Worker {
    control: Control,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts `run` on a thread called `name`. When the thread cannot be started the worker does nothing and
    /// the error is logged (the store still works: searches stay exact, recomputes do not happen).
    pub(crate) fn spawn(name: &str, run: impl FnOnce(Control) + Send + 'static) -> Worker {
        let control =
            Control { woken: Arc::new((Mutex::new(false), Condvar::new())), stop: Arc::new(AtomicBool::new(false)) };
        let c = control.clone();
        let thread = match std::thread::Builder::new().name(name.to_string()).spawn(move || run(c)) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::error!(error = %e, worker = name, "could not start a background thread");
                None
            }
        };
        Worker { control, thread }
    }

    /// True when the thread could not be started.
    pub(crate) fn not_started(&self) -> bool {
        self.thread.is_none() && !self.control.stopped()
    }

    /// A handle to wake the worker from elsewhere.
    pub(crate) fn control(&self) -> Control {
        self.control.clone()
    }

    /// Wakes the worker.
    pub(crate) fn wake(&self) {
        self.control.wake();
    }

    /// Asks the worker to stop, wakes it and joins it (idempotent).
    pub(crate) fn stop(&mut self) {
        self.control.stop.store(true, Ordering::Release);
        self.control.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn wakes_run_the_loop_and_stop_joins() {
        let rounds = Arc::new(AtomicUsize::new(0));
        let r = rounds.clone();
        let mut w = Worker::spawn("engram-test", move |c| {
            while !c.stopped() {
                c.wait(Duration::from_secs(60));
                r.fetch_add(1, Ordering::AcqRel);
            }
        });
        assert!(!w.not_started());
        w.wake();
        let t = Instant::now();
        while rounds.load(Ordering::Acquire) == 0 && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(rounds.load(Ordering::Acquire) >= 1, "a wake-up ran the loop before the 60 s timeout");
        w.stop();
        assert!(w.thread.is_none());
        w.stop();
    }

    #[test]
    fn sleep_returns_false_once_stopped() {
        let c = Control { woken: Arc::new((Mutex::new(false), Condvar::new())), stop: Arc::new(AtomicBool::new(true)) };
        assert!(!c.sleep(Duration::from_secs(60)));
    }
}
