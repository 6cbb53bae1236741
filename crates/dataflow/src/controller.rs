//! The thread of a job's controller (the autoscaler, the load shedder): it runs beside the
//! job in its process until the handle is dropped, which stops it and waits for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A running controller thread; dropping it stops the thread.
pub(crate) struct ControllerThread {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControllerThread {
    /// Runs `run` on a thread named `name`; it should return once its flag is set.
    pub(crate) fn spawn(name: &str, run: impl FnOnce(Arc<AtomicBool>) + Send + 'static) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&done);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(stop))
            .ok();
        ControllerThread { done, thread }
    }
}

impl Drop for ControllerThread {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
