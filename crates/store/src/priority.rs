//! Which writes may wait for a flush that someone else needs.
//!
//! A write a user is waiting for should be made durable at once; a controller's follow-up write
//! (a condition, an Event) has nobody waiting on it but its own loop. When both start flushes, a
//! burst of follow-up writes keeps the disk busy, and every user's write waits behind a flush
//! full of them. A thread marked background makes its writes background writes: the engine's
//! group commit starts no flush for them, lets them ride the next flush a foreground write
//! starts, and makes them durable on a committer thread of its own when none comes soon. They
//! are acknowledged and seen by watchers only once durable, as every write is.
//!
//! The class belongs to the thread that applies the write, as a thread's CPU and I/O priority
//! do: a runtime whose threads serve only background work (the control loops) marks each of
//! its threads when it starts them. Engines that batch writes in their own way (etcd) need no
//! such hint and ignore it.

use std::cell::Cell;

thread_local! {
    static BACKGROUND: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread's writes as background writes for as long as the thread lives.
pub fn mark_thread_background() {
    BACKGROUND.with(|background| background.set(true));
}

/// Whether writes applied on the calling thread are background writes.
pub fn is_background_thread() -> bool {
    BACKGROUND.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_marked_thread_writes_in_the_background() {
        assert!(!is_background_thread());
        let marked = std::thread::spawn(|| {
            mark_thread_background();
            is_background_thread()
        });
        assert!(marked.join().expect("the marked thread ran"));
        assert!(!is_background_thread(), "marking another thread leaves this one foreground");
    }
}
