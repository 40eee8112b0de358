//! Writes whose leader died. A member hands a write to its leader as a proposal; when that
//! leader dies before replicating it, the proposal is gone, and the member that took the
//! write answers only when etcd's request timeout runs out (five seconds plus two election
//! timeouts), long after the cluster has elected another leader.
//!
//! A new leader commits, as its first act, every entry the old one had replicated to a
//! majority. So once a leader of a later term than the one a write was sent in answers, a write
//! still unanswered a moment later is most likely lost, and in any case of unknown outcome: it
//! is given up as timed out, which the caller reports as such (a client trying it again finds
//! it applied, or applies it). A write that is merely slow, while the leader stays, is waited
//! for as long as etcd takes.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use etcd_client::{Client, ResponseHeader};

/// How long a write waits before asking whether the leader changed: far more than a write
/// takes while the cluster has a leader.
const SLOW: Duration = Duration::from_millis(300);

/// How often a slow write asks again.
const POLL: Duration = Duration::from_millis(100);

/// How long a slow write still waits once a later leader answers: a few heartbeats, in which
/// the new leader commits what its predecessor had replicated and the member answers.
const GRACE: Duration = Duration::from_millis(300);

/// The highest raft term any answer from the cluster has carried.
#[derive(Debug, Default)]
pub(crate) struct Terms {
    seen: AtomicU64,
}

impl Terms {
    /// Notes the term an answer carried.
    pub(crate) fn saw(&self, header: Option<&ResponseHeader>) {
        if let Some(header) = header {
            self.seen.fetch_max(header.raft_term(), Ordering::Relaxed);
        }
    }

    fn current(&self) -> u64 {
        self.seen.load(Ordering::Relaxed)
    }

    /// Runs `write`, giving it up as timed out when a leader of a later term than the one it
    /// was sent in has answered and the write still has not, [`GRACE`] later.
    pub(crate) async fn unless_its_leader_died<T>(
        &self,
        client: &Client,
        write: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, etcd_client::Error> {
        self.give_up_after_a_later_leader(write, || {
            let mut client = client.clone();
            async move { client.status().await.ok().filter(|status| status.leader() != 0).map(|s| s.raft_term()) }
        })
        .await
    }

    /// [`Terms::unless_its_leader_died`], asking `leader_term` for the term of the leader a
    /// member follows (`None` while it follows none or does not answer).
    async fn give_up_after_a_later_leader<T, Ask, Asked>(
        &self,
        write: impl Future<Output = Result<T, etcd_client::Error>>,
        mut leader_term: Ask,
    ) -> Result<T, etcd_client::Error>
    where
        Ask: FnMut() -> Asked,
        Asked: Future<Output = Option<u64>>,
    {
        let mut sent_in = self.current();
        tokio::pin!(write);
        let mut wait = SLOW;
        loop {
            tokio::select! {
                biased;
                answer = &mut write => return answer,
                () = tokio::time::sleep(wait) => {}
            }
            wait = POLL;
            let asked = tokio::select! {
                biased;
                answer = &mut write => return answer,
                asked = tokio::time::timeout(POLL, leader_term()) => asked,
            };
            let Ok(Some(term)) = asked else { continue };
            self.seen.fetch_max(term, Ordering::Relaxed);
            if sent_in == 0 {
                // Nothing had answered before the write was sent: the first term asked
                // stands for the one it was sent in.
                sent_in = term;
            }
            if term > sent_in {
                return tokio::select! {
                    biased;
                    answer = &mut write => answer,
                    () = tokio::time::sleep(GRACE) => Err(lost(term)),
                };
            }
        }
    }
}

fn lost(term: u64) -> etcd_client::Error {
    etcd_client::Error::IoError(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "the etcd leader this write was proposed to was replaced (now term {term}) and the write was not \
             answered: whether it was applied is not known"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Instant;

    use super::*;

    /// A write that answers `after`, and a cluster whose leader is of term `old` until `elected`
    /// and of `old + 1` from then on, both on tokio's paused clock.
    async fn run(
        terms: &Terms,
        after: Option<Duration>,
        old: u64,
        elected: Option<Duration>,
    ) -> (Result<&'static str, etcd_client::Error>, Duration, usize) {
        let start = tokio::time::Instant::now();
        let asked = Mutex::new(0);
        let write = async move {
            match after {
                Some(after) => {
                    tokio::time::sleep(after).await;
                    Ok("applied")
                }
                None => std::future::pending().await,
            }
        };
        let answer = terms
            .give_up_after_a_later_leader(write, || {
                *asked.lock().unwrap() += 1;
                let term = match elected {
                    Some(at) if start.elapsed() >= at => old + 1,
                    _ => old,
                };
                async move { Some(term) }
            })
            .await;
        let asked = *asked.lock().unwrap();
        (answer, start.elapsed(), asked)
    }

    fn sent_in(term: u64) -> Terms {
        Terms { seen: AtomicU64::new(term) }
    }

    #[tokio::test(start_paused = true)]
    async fn a_fast_write_asks_nothing_and_a_slow_one_under_the_same_leader_is_waited_for() {
        let (answer, _, asked) = run(&sent_in(4), Some(Duration::from_millis(20)), 4, None).await;
        assert_eq!(answer.unwrap(), "applied");
        assert_eq!(asked, 0, "a write answered within {SLOW:?} costs no question");

        let (answer, took, asked) = run(&sent_in(4), Some(Duration::from_secs(6)), 4, None).await;
        assert_eq!(answer.unwrap(), "applied");
        assert_eq!(took, Duration::from_secs(6));
        assert!(asked > 10, "it kept asking while it waited: {asked}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_lost_with_its_leader_is_given_up_soon_after_a_later_leader_answers() {
        let elected = Duration::from_millis(1250);
        let (answer, took, _) = run(&sent_in(4), None, 4, Some(elected)).await;
        let error = answer.unwrap_err();
        assert!(error.to_string().contains("whether it was applied is not known"), "{error}");
        assert!(took >= elected + GRACE, "the new leader had its grace: {took:?}");
        assert!(took <= elected + POLL + GRACE, "given up a grace after the new leader was seen: {took:?}");

        // A write the new leader commits within its grace is answered as applied.
        let (answer, _, _) = run(&sent_in(4), Some(elected + GRACE / 2), 4, Some(elected)).await;
        assert_eq!(answer.unwrap(), "applied");
    }

    #[tokio::test(start_paused = true)]
    async fn with_no_term_known_before_the_write_the_first_one_asked_stands_for_it() {
        let elected = Duration::from_secs(1);
        let terms = Terms::default();
        let (answer, took, _) = run(&terms, None, 7, Some(elected)).await;
        assert!(answer.is_err() && took <= elected + POLL + GRACE, "{took:?}");
        assert_eq!(terms.current(), 8, "the terms asked are remembered");

        let started = Instant::now();
        let (answer, _, _) = run(&Terms::default(), Some(Duration::from_secs(3)), 7, None).await;
        assert_eq!(answer.unwrap(), "applied", "a slow write under one leader is not given up");
        assert!(started.elapsed() < Duration::from_secs(1), "the clock was tokio's paused one");
    }
}
