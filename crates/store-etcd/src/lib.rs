//! The distributed store: the storage port over etcd v3, so several controller replicas share
//! one state. etcd already is a revisioned key-value store with transactions, watches and
//! leases; this crate translates, keeping every key under a configurable prefix so several
//! deployments can share one etcd cluster.
//!
//! Revisions are etcd's own, shared by everything in that cluster: they only move forward, but
//! other deployments' writes advance them too, and compaction is cluster-wide.
//!
//! This crate knows nothing of what the keys mean. Start at [`EtcdStore::connect`].

mod leader;
mod retry;
#[cfg(feature = "test-server")]
pub mod test_server;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Client, CompactionOptions, CompareOp, ConnectOptions, DeleteOptions, GetOptions, PutOptions, TxnOp,
    TxnOpResponse, WatchOptions,
};
use kayra_store::watch::{Delivery, WatchSender, watch_channel};
use kayra_store::{
    Compare, DEFAULT_MAX_VALUE_SIZE, Event, EventKind, KeyValue, Lease, LeaseId, Op, RangeRequest,
    RangeResult, Revision, Store, StoreError, Txn, TxnResult, WatchBatch, Watcher,
};

use crate::leader::Terms;
use crate::retry::{Call, retrying};

/// How often a watch asks etcd how far it is.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How to reach etcd and how to behave on top of it.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// etcd client URLs, such as `http://127.0.0.1:2379`.
    pub endpoints: Vec<String>,
    /// Every key is stored under this prefix, such as `/kayra/`.
    pub prefix: String,
    /// The largest value accepted, in bytes. etcd's `--max-request-bytes` must leave room for
    /// it.
    pub max_value_size: usize,
    /// How many revisions a watcher may have queued before it is cut off as too slow.
    pub watch_buffer: usize,
    /// How long to wait for etcd to answer when connecting.
    pub connect_timeout: Duration,
    /// How often each watch asks etcd how far it is while nothing asks sooner.
    pub progress_every: Duration,
}

impl EtcdOptions {
    /// Defaults for the given endpoints and prefix.
    pub fn new(endpoints: Vec<String>, prefix: impl Into<String>) -> EtcdOptions {
        EtcdOptions {
            endpoints,
            prefix: prefix.into(),
            max_value_size: DEFAULT_MAX_VALUE_SIZE,
            watch_buffer: 1024,
            connect_timeout: Duration::from_secs(5),
            progress_every: PROGRESS_EVERY,
        }
    }
}

/// The storage port over an etcd cluster.
#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
    prefix: Vec<u8>,
    max_value_size: usize,
    watch_buffer: usize,
    /// How often each watch asks etcd for progress on its own.
    progress_every: Duration,
    /// Whether etcd sends a watch's progress report only after every change it covers, so
    /// that a report may answer reads (see [`progress_is_ordered`]).
    ordered_progress: bool,
    /// The latest raft term the cluster's answers carried, which tells a write waiting on a
    /// dead leader from a slow one.
    terms: Arc<Terms>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore").field("prefix", &String::from_utf8_lossy(&self.prefix)).finish()
    }
}

impl EtcdStore {
    /// Connects to etcd and checks that it answers; an unreachable cluster is
    /// [`StoreError::Unavailable`] naming the endpoints.
    pub async fn connect(options: EtcdOptions) -> Result<EtcdStore, StoreError> {
        let unreachable = |error: Option<etcd_client::Error>| StoreError::Unavailable {
            message: format!("cannot reach etcd at {}", options.endpoints.join(", ")),
            source: error.map(|error| Box::new(error) as _),
        };
        let connect = ConnectOptions::new()
            .with_connect_timeout(options.connect_timeout)
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
            // A member without a leader refuses at once ("no leader"), so the call is tried on
            // another, instead of waiting out etcd's request timeout.
            .with_require_leader(true);
        // The client connects to each member when a call first needs it: any one member that
        // answers is enough to start, as it is to serve.
        let attempt = async {
            let client = Client::connect(&options.endpoints, Some(connect)).await?;
            let status = retrying(Call::Idempotent, || {
                let mut client = client.clone();
                async move { client.status().await }
            })
            .await?;
            Ok::<_, etcd_client::Error>((client, status.version().to_owned()))
        };
        let (client, version) = match tokio::time::timeout(options.connect_timeout, attempt).await {
            Ok(Ok(connected)) => connected,
            Ok(Err(error)) => return Err(unreachable(Some(error))),
            Err(_) => return Err(unreachable(None)),
        };
        let ordered_progress = progress_is_ordered(&version);
        if !ordered_progress {
            tracing::info!(
                %version,
                "this etcd may report a watch's progress before changes it covers (fixed in 3.4.31 and \
                 3.5.13): reads of the latest state are answered by etcd, not from the watch caches"
            );
        }
        Ok(EtcdStore {
            client,
            prefix: options.prefix.into_bytes(),
            max_value_size: options.max_value_size,
            watch_buffer: options.watch_buffer,
            progress_every: options.progress_every,
            ordered_progress,
            terms: Arc::default(),
        })
    }

    fn full_key(&self, key: &str) -> Vec<u8> {
        [self.prefix.as_slice(), key.as_bytes()].concat()
    }

    /// The key as the port knows it: etcd's key without the prefix.
    fn own_key(&self, key: &[u8]) -> Result<String, StoreError> {
        let own = key
            .strip_prefix(self.prefix.as_slice())
            .ok_or_else(|| StoreError::Corrupt(format!("etcd returned key {key:?} outside the prefix")))?;
        String::from_utf8(own.to_vec())
            .map_err(|_| StoreError::Corrupt(format!("etcd holds a key that is not UTF-8: {key:?}")))
    }

    fn key_value(&self, kv: &etcd_client::KeyValue) -> Result<KeyValue, StoreError> {
        Ok(KeyValue {
            key: self.own_key(kv.key())?,
            value: kv.value().to_vec(),
            create_revision: revision(kv.create_revision()),
            mod_revision: revision(kv.mod_revision()),
            version: kv.version().max(0) as u64,
            lease: (kv.lease() != 0).then_some(LeaseId(kv.lease())),
        })
    }

    /// The oldest revision etcd still serves, learnt the way etcd tells it: a watch from
    /// revision one is cancelled with the compaction point.
    async fn compaction_point(&self) -> Revision {
        let mut client = self.client.clone();
        let probe = async {
            let options = WatchOptions::new().with_start_revision(1);
            let mut stream = client.watch(self.prefix.clone(), Some(options)).await.ok()?;
            while let Ok(Some(response)) = stream.message().await {
                if response.compact_revision() > 0 {
                    return Some(revision(response.compact_revision()));
                }
                if !response.created() {
                    return None;
                }
            }
            None
        };
        tokio::time::timeout(Duration::from_secs(2), probe).await.ok().flatten().unwrap_or(0)
    }

    /// Maps an etcd error, filling in what etcd's messages leave out.
    async fn error(&self, action: &str, error: etcd_client::Error, requested: Revision) -> StoreError {
        match classify(&error) {
            Some(Known::Compacted) => {
                StoreError::Compacted { requested, compacted: self.compaction_point().await }
            }
            Some(Known::FutureRevision) => {
                let current = self.revision().await.unwrap_or(0);
                StoreError::FutureRevision { requested, current }
            }
            _ => store_error(action, error),
        }
    }
}

/// The end of the range holding every key that starts with `prefix`.
fn range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// Whether etcd of `version` sends a watch's progress report only after every change it
/// covers. Before 3.4.31 and 3.5.13 a report can overtake the changes of a write it counts
/// (etcd issues 15220 and 17507); kube-apiserver trusts them from the same releases.
pub fn progress_is_ordered(version: &str) -> bool {
    let mut parts = version.split(['.', '-', '+']).map(|part| part.parse::<u32>().ok());
    let (Some(Some(major)), Some(Some(minor)), Some(Some(patch))) =
        (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    match (major, minor) {
        (3, 4) => patch >= 31,
        (3, 5) => patch >= 13,
        (3, minor) => minor > 5,
        (major, _) => major > 3,
    }
}

impl EtcdStore {
    /// Whether this etcd's watch progress reports come after every change they cover
    /// ([`progress_is_ordered`] of its version): then watch caches may answer reads of the
    /// latest state from a report, otherwise etcd answers them.
    pub fn progress_is_ordered(&self) -> bool {
        self.ordered_progress
    }
}

fn revision(etcd: i64) -> Revision {
    etcd.max(0) as Revision
}

fn etcd_revision(revision: Revision) -> i64 {
    i64::try_from(revision).unwrap_or(i64::MAX)
}

/// etcd errors the port gives a type of its own.
enum Known {
    Compacted,
    FutureRevision,
    LeaseNotFound,
    TooLarge,
}

/// etcd reports these as gRPC statuses with fixed messages (its `rpctypes`).
fn classify(error: &etcd_client::Error) -> Option<Known> {
    let message = match error {
        etcd_client::Error::GRpcStatus(status) => status.message(),
        // The client reports a keep-alive answered with TTL zero this way.
        etcd_client::Error::LeaseKeepAliveError(message) => message.as_str(),
        _ => return None,
    };
    if message.contains("required revision has been compacted") {
        Some(Known::Compacted)
    } else if message.contains("required revision is a future revision") {
        Some(Known::FutureRevision)
    } else if message.contains("lease not found") {
        Some(Known::LeaseNotFound)
    } else if message.contains("request is too large") {
        Some(Known::TooLarge)
    } else {
        None
    }
}

/// The one place the rest of etcd's errors become the port's.
fn store_error(action: &str, error: etcd_client::Error) -> StoreError {
    use etcd_client::Error as E;
    let unavailable = |error: E| StoreError::Unavailable {
        message: format!("etcd did not answer while trying to {action}"),
        source: Some(Box::new(error)),
    };
    match error {
        E::GRpcStatus(ref status) => match i32::from(status.code()) {
            grpc_code::UNAVAILABLE
            | grpc_code::DEADLINE_EXCEEDED
            | grpc_code::ABORTED
            | grpc_code::CANCELLED
            | grpc_code::RESOURCE_EXHAUSTED => unavailable(error),
            // The connection to a member broke (tonic reports it with code Unknown).
            _ if status.message().contains("transport error") => unavailable(error),
            grpc_code::INVALID_ARGUMENT | grpc_code::FAILED_PRECONDITION | grpc_code::OUT_OF_RANGE => {
                StoreError::InvalidArgument(format!("etcd refused to {action}: {}", status.message()))
            }
            _ => StoreError::engine(action, error),
        },
        E::TransportError(_) | E::IoError(_) | E::WatchError(_) | E::LeaseKeepAliveError(_) => {
            unavailable(error)
        }
        other => StoreError::engine(action, other),
    }
}

/// The gRPC status codes etcd answers with (the gRPC specification's numbers).
mod grpc_code {
    pub(crate) const CANCELLED: i32 = 1;
    pub(crate) const RESOURCE_EXHAUSTED: i32 = 8;
    pub(crate) const INVALID_ARGUMENT: i32 = 3;
    pub(crate) const DEADLINE_EXCEEDED: i32 = 4;
    pub(crate) const FAILED_PRECONDITION: i32 = 9;
    pub(crate) const ABORTED: i32 = 10;
    pub(crate) const OUT_OF_RANGE: i32 = 11;
    pub(crate) const UNAVAILABLE: i32 = 14;
}

#[async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let key = self.full_key(key);
        let response = retrying(Call::Idempotent, || {
            let (mut client, key) = (self.client.clone(), key.clone());
            async move { client.get(key, None).await }
        })
        .await
        .map_err(|error| store_error("read a key", error))?;
        response.kvs().first().map(|kv| self.key_value(kv)).transpose()
    }

    async fn range(&self, request: &RangeRequest) -> Result<RangeResult, StoreError> {
        request.validate()?;
        let prefix = self.full_key(&request.prefix);
        let start = request.start.as_deref().map_or_else(|| prefix.clone(), |start| self.full_key(start));
        let mut options = GetOptions::new().with_range(range_end(&prefix));
        if let Some(limit) = request.limit.filter(|limit| *limit > 0) {
            options = options.with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        let requested = request.revision.unwrap_or(0);
        if requested > 0 {
            options = options.with_revision(etcd_revision(requested));
        }
        let response = retrying(Call::Idempotent, || {
            let (mut client, start, options) = (self.client.clone(), start.clone(), options.clone());
            async move { client.get(start, Some(options)).await }
        });
        let response = match response.await {
            Ok(response) => response,
            Err(error) => return Err(self.error("read a range", error, requested).await),
        };
        self.terms.saw(response.header());
        let kvs = response.kvs().iter().map(|kv| self.key_value(kv)).collect::<Result<Vec<_>, _>>()?;
        let header = response.header().map_or(0, |header| revision(header.revision()));
        Ok(RangeResult {
            count: usize::try_from(response.count()).unwrap_or(0),
            more: response.more(),
            kvs,
            revision: if requested > 0 { requested } else { header },
        })
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        txn.validate(self.max_value_size)?;
        if let (true, [Op::Put { key, value, lease }]) = (txn.compares.is_empty(), txn.ops.as_slice()) {
            return self.put_one(key, value, *lease).await;
        }
        let compares: Vec<etcd_client::Compare> = txn
            .compares
            .iter()
            .map(|compare| match compare {
                Compare::Absent(key) => {
                    etcd_client::Compare::create_revision(self.full_key(key), CompareOp::Equal, 0)
                }
                Compare::ModifiedAt(key, at) => etcd_client::Compare::mod_revision(
                    self.full_key(key),
                    CompareOp::Equal,
                    etcd_revision(*at),
                ),
            })
            .collect();
        let ops: Vec<TxnOp> = txn
            .ops
            .iter()
            .map(|op| match op {
                Op::Put { key, value, lease } => {
                    let mut options = PutOptions::new().with_prev_key();
                    if let Some(lease) = lease {
                        options = options.with_lease(lease.0);
                    }
                    TxnOp::put(self.full_key(key), value.clone(), Some(options))
                }
                Op::Delete { key } => {
                    TxnOp::delete(self.full_key(key), Some(DeleteOptions::new().with_prev_key()))
                }
            })
            .collect();
        let reads: Vec<TxnOp> =
            txn.compares.iter().map(|c| TxnOp::get(self.full_key(c.key()), None)).collect();
        let request = etcd_client::Txn::new().when(compares).and_then(ops).or_else(reads);
        let response = retrying(Call::Write, || {
            let (mut client, request) = (self.client.clone(), request.clone());
            self.terms.unless_its_leader_died(&self.client, async move { client.txn(request).await })
        });
        let response = response.await.map_err(|error| match classify(&error) {
            Some(Known::LeaseNotFound) => {
                let lease = txn.ops.iter().find_map(|op| match op {
                    Op::Put { lease, .. } => *lease,
                    Op::Delete { .. } => None,
                });
                StoreError::LeaseNotFound(lease.unwrap_or(LeaseId(0)))
            }
            Some(Known::TooLarge) => {
                StoreError::InvalidArgument("the transaction is larger than etcd accepts".to_owned())
            }
            _ => store_error("apply a transaction", error),
        })?;
        self.terms.saw(response.header());
        let revision = response.header().map_or(0, |header| revision(header.revision()));
        let answers = response.op_responses();
        if response.succeeded() {
            let prev = answers
                .iter()
                .map(|answer| match answer {
                    TxnOpResponse::Put(put) => put.prev_key().map(|kv| self.key_value(kv)).transpose(),
                    TxnOpResponse::Delete(delete) => {
                        delete.prev_kvs().first().map(|kv| self.key_value(kv)).transpose()
                    }
                    _ => Ok(None),
                })
                .collect::<Result<_, _>>()?;
            Ok(TxnResult::Applied { revision, prev })
        } else {
            let current = answers
                .iter()
                .map(|answer| match answer {
                    TxnOpResponse::Get(get) => get.kvs().first().map(|kv| self.key_value(kv)).transpose(),
                    _ => Ok(None),
                })
                .collect::<Result<_, _>>()?;
            Ok(TxnResult::Conflict { revision, current })
        }
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watcher, StoreError> {
        let current = self.revision().await?;
        if after > current {
            return Err(StoreError::FutureRevision { requested: after, current });
        }
        let key = self.full_key(prefix);
        let options = WatchOptions::new()
            .with_range(range_end(&key))
            .with_start_revision(etcd_revision(after + 1))
            .with_prev_key();
        let mut stream = retrying(Call::Idempotent, || {
            let (mut client, key, options) = (self.client.clone(), key.clone(), options.clone());
            async move { client.watch(key, Some(options)).await }
        })
        .await
        .map_err(|error| store_error("start a watch", error))?;
        match stream.message().await {
            Ok(Some(response)) if response.created() => {}
            Ok(_) => {
                return Err(StoreError::Unavailable {
                    message: "etcd closed the watch before confirming it".to_owned(),
                    source: None,
                });
            }
            Err(error) => return Err(store_error("start a watch", error)),
        }
        let (sender, mut watcher) = watch_channel(self.watch_buffer, after, Vec::new());
        if !self.ordered_progress {
            watcher = watcher.with_unordered_progress();
        }
        let store = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = sender.closed() => {}
                failure = store.forward(&mut stream, &sender, after) => {
                    if let Some(failure) = failure {
                        sender.fail(failure);
                    }
                }
            }
        });
        Ok(watcher)
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        let compacted = retrying(Call::Write, || {
            let mut client = self.client.clone();
            async move {
                client.compact(etcd_revision(revision), Some(CompactionOptions::new().with_physical())).await
            }
        });
        match compacted.await {
            Ok(_) => Ok(()),
            Err(error) => Err(self.error("compact history", error, revision).await),
        }
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        let response = retrying(Call::Idempotent, || {
            let (mut client, prefix) = (self.client.clone(), self.prefix.clone());
            async move { client.get(prefix, Some(GetOptions::new().with_count_only())).await }
        })
        .await
        .map_err(|error| store_error("read the revision", error))?;
        Ok(response.header().map_or(0, |header| revision(header.revision())))
    }

    async fn grant_lease(&self, ttl: Duration) -> Result<Lease, StoreError> {
        let seconds = (ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0)).max(1);
        let ttl = i64::try_from(seconds).unwrap_or(i64::MAX);
        let response = retrying(Call::Write, || {
            let mut client = self.client.clone();
            async move { client.lease_grant(ttl, None).await }
        })
        .await
        .map_err(|error| store_error("grant a lease", error))?;
        Ok(Lease { id: LeaseId(response.id()), ttl: Duration::from_secs(response.ttl().max(0) as u64) })
    }

    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration, StoreError> {
        let renewed = retrying(Call::Idempotent, || {
            let mut client = self.client.clone();
            async move {
                let (mut keeper, mut stream) = client.lease_keep_alive(lease.0).await?;
                keeper.keep_alive().await?;
                stream.message().await
            }
        });
        match renewed.await {
            Ok(Some(response)) if response.ttl() > 0 => Ok(Duration::from_secs(response.ttl() as u64)),
            Ok(_) => Err(StoreError::LeaseNotFound(lease)),
            Err(error) if matches!(classify(&error), Some(Known::LeaseNotFound)) => {
                Err(StoreError::LeaseNotFound(lease))
            }
            Err(error) => Err(store_error("keep a lease alive", error)),
        }
    }

    async fn revoke_lease(&self, lease: LeaseId) -> Result<(), StoreError> {
        let revoked = retrying(Call::Write, || {
            let mut client = self.client.clone();
            async move { client.lease_revoke(lease.0).await }
        });
        match revoked.await {
            Ok(_) => Ok(()),
            Err(error) if matches!(classify(&error), Some(Known::LeaseNotFound)) => {
                Err(StoreError::LeaseNotFound(lease))
            }
            Err(error) => Err(store_error("revoke a lease", error)),
        }
    }
}

impl EtcdStore {
    /// An unconditional single put, which etcd serves more cheaply as a put than as a
    /// transaction.
    async fn put_one(
        &self,
        key: &str,
        value: &[u8],
        lease: Option<LeaseId>,
    ) -> Result<TxnResult, StoreError> {
        let mut options = PutOptions::new().with_prev_key();
        if let Some(lease) = lease {
            options = options.with_lease(lease.0);
        }
        let key = self.full_key(key);
        let put = retrying(Call::Write, || {
            let (mut client, key, value, options) =
                (self.client.clone(), key.clone(), value.to_vec(), options.clone());
            self.terms.unless_its_leader_died(&self.client, async move {
                client.put(key, value, Some(options)).await
            })
        });
        let response = put.await.map_err(|error| match (classify(&error), lease) {
            (Some(Known::LeaseNotFound), Some(lease)) => StoreError::LeaseNotFound(lease),
            _ => store_error("write a key", error),
        })?;
        self.terms.saw(response.header());
        let revision = response.header().map_or(0, |header| revision(header.revision()));
        let prev = response.prev_key().map(|kv| self.key_value(kv)).transpose()?;
        Ok(TxnResult::Applied { revision, prev: vec![prev] })
    }

    /// Feeds a watcher from etcd's stream until something ends it; answers the error to hand
    /// the watcher, or `None` when the watcher is gone or was cut off.
    async fn forward(
        &self,
        stream: &mut etcd_client::WatchStream,
        sender: &WatchSender,
        after: Revision,
    ) -> Option<StoreError> {
        // Asked for regularly, and at once whenever the watcher's reader waits for it (only
        // when they are ordered), etcd's progress reports let the watcher know how far it is
        // even when nothing under its prefix changes.
        let mut progress = tokio::time::interval(self.progress_every);
        loop {
            let message = tokio::select! {
                message = stream.message() => message,
                _ = progress.tick() => {
                    if let Err(error) = stream.request_progress().await {
                        return Some(store_error("ask for watch progress", error));
                    }
                    continue;
                }
                () = sender.progress_requested() => {
                    if let Err(error) = stream.request_progress().await {
                        return Some(store_error("ask for watch progress", error));
                    }
                    continue;
                }
            };
            let response = match message {
                Ok(Some(response)) => response,
                Ok(None) => {
                    return Some(StoreError::Unavailable {
                        message: "etcd ended the watch".to_owned(),
                        source: None,
                    });
                }
                Err(error) => return Some(store_error("follow a watch", error)),
            };
            if response.compact_revision() > 0 {
                let compacted = revision(response.compact_revision());
                return Some(StoreError::Compacted { requested: after, compacted });
            }
            if response.canceled() {
                return Some(StoreError::Unavailable {
                    message: format!("etcd cancelled the watch: {}", response.cancel_reason()),
                    source: None,
                });
            }
            self.terms.saw(response.header());
            let mut batches: Vec<WatchBatch> = Vec::new();
            if response.events().is_empty() && !response.created() {
                let reached = response.header().map_or(0, |header| revision(header.revision()));
                batches.push(WatchBatch { revision: reached, events: Vec::new() });
            }
            for event in response.events() {
                let Some(kv) = event.kv() else { continue };
                let kind = match event.event_type() {
                    etcd_client::EventType::Put => EventKind::Put,
                    etcd_client::EventType::Delete => EventKind::Delete,
                };
                let prev = match event.prev_kv().map(|kv| self.key_value(kv)).transpose() {
                    Ok(prev) => prev,
                    Err(error) => return Some(error),
                };
                let event = match self.key_value(kv) {
                    Ok(kv) => Event { kind, kv, prev },
                    Err(error) => return Some(error),
                };
                match batches.last_mut() {
                    Some(batch) if batch.revision == event.revision() => batch.events.push(event),
                    _ => batches.push(WatchBatch { revision: event.revision(), events: vec![event] }),
                }
            }
            for batch in batches {
                if sender.offer(std::sync::Arc::new(batch)) == Delivery::Gone {
                    return None;
                }
            }
        }
    }
}

/// The etcd client used directly, for benchmarks: the ceiling the store's overhead is measured
/// against.
#[cfg(feature = "bench")]
pub mod raw {
    /// An etcd client with nothing on top.
    #[derive(Clone)]
    pub struct RawEtcd {
        client: etcd_client::Client,
    }

    impl std::fmt::Debug for RawEtcd {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("RawEtcd")
        }
    }

    impl RawEtcd {
        /// Connects to one endpoint.
        pub async fn connect(endpoint: &str) -> Result<RawEtcd, String> {
            let client =
                etcd_client::Client::connect([endpoint], None).await.map_err(|error| error.to_string())?;
            Ok(RawEtcd { client })
        }

        /// A plain put; etcd acknowledges once it is committed.
        pub async fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
            self.client.clone().put(key, value, None).await.map(drop).map_err(|error| error.to_string())
        }

        /// A plain get; answers whether the key exists.
        pub async fn get(&self, key: &[u8]) -> Result<bool, String> {
            let response = self.client.clone().get(key, None).await.map_err(|error| error.to_string())?;
            Ok(!response.kvs().is_empty())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_reports_are_trusted_from_the_releases_that_order_them() {
        for ordered in ["3.4.31", "3.4.34", "3.5.13", "3.5.21", "3.6.0", "4.0.0", "3.5.13-rc.1"] {
            assert!(progress_is_ordered(ordered), "{ordered}");
        }
        for unordered in ["3.4.23", "3.4.30", "3.5.0", "3.5.12", "3.3.27", "2.3.8", "", "v3.5.13", "3.5"] {
            assert!(!progress_is_ordered(unordered), "{unordered}");
        }
    }
}
