//! How the engine lays its data out in a backend: one record per written key version, keyed by
//! revision so history scans in revision order, plus a few metadata entries.
//!
//! ```text
//! r <main:u64 BE> <sub:u32 BE>  -> record: flags:u8 create:u64 version:u64 lease:i64
//!                                  key_len:u32 key value
//! l <lease:i64 BE>              -> ttl seconds: u64 BE
//! m/compacted                   -> the compaction point: u64 BE
//! m/lease-seq                   -> the last lease id granted: i64 BE
//! ```

use crate::{LeaseId, Revision, StoreError};

/// The backend key of the compaction point.
pub(crate) const COMPACTED_KEY: &[u8] = b"m/compacted";
/// The backend key of the last lease id granted.
pub(crate) const LEASE_SEQ_KEY: &[u8] = b"m/lease-seq";
/// The first byte of every record key.
pub(crate) const RECORD_TAG: u8 = b'r';
/// The first byte of every lease key.
pub(crate) const LEASE_TAG: u8 = b'l';

const TOMBSTONE: u8 = 1;
const HAS_LEASE: u8 = 2;
pub(crate) const HEADER_LEN: usize = 1 + 8 + 8 + 8 + 4;

/// The position of one key version in history: its revision and its place in the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Rev {
    pub(crate) main: Revision,
    pub(crate) sub: u32,
}

impl Rev {
    pub(crate) fn key(self) -> [u8; 13] {
        let mut key = [0; 13];
        key[0] = RECORD_TAG;
        key[1..9].copy_from_slice(&self.main.to_be_bytes());
        key[9..].copy_from_slice(&self.sub.to_be_bytes());
        key
    }

    pub(crate) fn from_key(key: &[u8]) -> Result<Rev, StoreError> {
        match key {
            [RECORD_TAG, main @ .., s0, s1, s2, s3] if main.len() == 8 => Ok(Rev {
                main: u64::from_be_bytes(main.try_into().expect("eight bytes, matched above")),
                sub: u32::from_be_bytes([*s0, *s1, *s2, *s3]),
            }),
            _ => Err(StoreError::Corrupt(format!("malformed record key {key:?}"))),
        }
    }
}

/// What a record says about its key, without the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    /// The key holds a value.
    Live { create_revision: Revision, version: u64, lease: Option<LeaseId> },
    /// The key was deleted.
    Tombstone,
}

/// A decoded record.
#[derive(Debug)]
pub(crate) struct Record {
    pub(crate) key: String,
    pub(crate) version: Version,
    pub(crate) value: Vec<u8>,
}

pub(crate) fn encode(key: &str, version: Version, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + key.len() + value.len());
    let (flags, create, count, lease) = match version {
        Version::Live { create_revision, version, lease } => (
            if lease.is_some() { HAS_LEASE } else { 0 },
            create_revision,
            version,
            lease.map_or(0, |lease| lease.0),
        ),
        Version::Tombstone => (TOMBSTONE, 0, 0, 0),
    };
    out.push(flags);
    out.extend_from_slice(&create.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&lease.to_be_bytes());
    let key_len = u32::try_from(key.len()).expect("keys are bounded far below 4 GiB");
    out.extend_from_slice(&key_len.to_be_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(value);
    out
}

pub(crate) fn decode(bytes: &[u8]) -> Result<Record, StoreError> {
    let corrupt = || StoreError::Corrupt(format!("malformed record of {} bytes", bytes.len()));
    let key_end = key_end(bytes)?;
    let u64_at = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
    let flags = bytes[0];
    let key = std::str::from_utf8(&bytes[HEADER_LEN..key_end]).map_err(|_| corrupt())?.to_owned();
    let version = if flags & TOMBSTONE != 0 {
        Version::Tombstone
    } else {
        let lease = (flags & HAS_LEASE != 0).then(|| LeaseId(u64_at(17) as i64));
        Version::Live { create_revision: u64_at(1), version: u64_at(9), lease }
    };
    Ok(Record { key, version, value: bytes[key_end..].to_vec() })
}

/// Only the value of a record: what a read needs once the index has told it the rest.
pub(crate) fn value(bytes: &[u8]) -> Result<Vec<u8>, StoreError> {
    Ok(bytes[key_end(bytes)?..].to_vec())
}

/// Where the key ends and the value starts, checking the header on the way.
fn key_end(bytes: &[u8]) -> Result<usize, StoreError> {
    let corrupt = || StoreError::Corrupt(format!("malformed record of {} bytes", bytes.len()));
    if bytes.len() < HEADER_LEN {
        return Err(corrupt());
    }
    let key_len = u32::from_be_bytes(bytes[25..29].try_into().expect("four bytes")) as usize;
    HEADER_LEN.checked_add(key_len).filter(|end| *end <= bytes.len()).ok_or_else(corrupt)
}

pub(crate) fn lease_key(lease: LeaseId) -> [u8; 9] {
    let mut key = [0; 9];
    key[0] = LEASE_TAG;
    key[1..].copy_from_slice(&lease.0.to_be_bytes());
    key
}

pub(crate) fn lease_from_key(key: &[u8]) -> Result<LeaseId, StoreError> {
    match key {
        [LEASE_TAG, id @ ..] if id.len() == 8 => {
            Ok(LeaseId(i64::from_be_bytes(id.try_into().expect("eight bytes, matched above"))))
        }
        _ => Err(StoreError::Corrupt(format!("malformed lease key {key:?}"))),
    }
}

pub(crate) fn decode_u64(name: &str, bytes: &[u8]) -> Result<u64, StoreError> {
    bytes
        .try_into()
        .map(u64::from_be_bytes)
        .map_err(|_| StoreError::Corrupt(format!("{name} is {} bytes, not 8", bytes.len())))
}
