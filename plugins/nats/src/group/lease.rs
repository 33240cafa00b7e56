//! The leases in NATS JetStream's key-value store.
//!
//! One bucket per group (`[group] bucket`, history 1, file storage) holds:
//!
//! | key | value | written |
//! | --- | --- | --- |
//! | `p.K` | partition K's lease: `{"owner": "HOST" or null, "epoch": N}` | created by the first taker (`create`: only if absent), then only with `update` against the revision last read: a renewal, a take, a release |
//! | `h.HOST` | `alive`, `leaving` or `left` | by HOST at every renewal; `leaving` when it starts to stop, `left` once it released everything |
//!
//! The broker's compare-and-set (`Nats-Expected-Last-Subject-Sequence`)
//! is the only arbiter: there is no consensus code here. Whoever writes a
//! key against a revision that is no longer its last loses, and learns it.

use std::time::Duration;

use async_nats::jetstream::kv;
use bytes::Bytes;
use futures_util::StreamExt;

/// A lease operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseError {
    /// Someone else wrote the key since the revision given (or created it).
    Conflict,
    /// The broker could not be reached, or answered with an error.
    Broker(String),
}

impl std::fmt::Display for LeaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeaseError::Conflict => {
                f.write_str("the key changed since it was read (another host wrote it)")
            }
            LeaseError::Broker(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for LeaseError {}

/// The group's bucket.
#[derive(Debug, Clone)]
pub struct Leases {
    kv: kv::Store,
    bucket: String,
    /// How long one request waits.
    timeout: Duration,
    /// Requests sent to the broker (each read, write and key listing).
    requests: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Leases {
    /// Connects to `url` and opens `bucket`, creating it if it is absent.
    /// Each request waits at most `timeout`.
    ///
    /// # Errors
    /// The server cannot be reached or has no JetStream.
    pub async fn open(url: &str, bucket: &str, timeout: Duration) -> Result<Self, LeaseError> {
        let client = connect(url, timeout, "squall group").await?;
        let mut js = async_nats::jetstream::new(client);
        js.set_timeout(timeout);
        let kv = match js.get_key_value(bucket).await {
            Ok(kv) => kv,
            Err(_) => {
                // The bucket's stream, as a KV bucket of history 1 (made by
                // hand: the client's own builder sends fields that older
                // servers refuse).
                use async_nats::jetstream::stream;
                let config = stream::Config {
                    name: format!("KV_{bucket}"),
                    description: Some("squall group leases".to_owned()),
                    subjects: vec![format!("$KV.{bucket}.>")],
                    max_messages_per_subject: 1,
                    storage: stream::StorageType::File,
                    allow_rollup: true,
                    deny_delete: true,
                    allow_direct: true,
                    discard: stream::DiscardPolicy::New,
                    ..Default::default()
                };
                let created = js.get_or_create_stream(config).await;
                match js.get_key_value(bucket).await {
                    Ok(kv) => kv,
                    Err(e) => {
                        let why = match created {
                            Err(c) => format!("{c}; then {e}"),
                            Ok(_) => e.to_string(),
                        };
                        return Err(LeaseError::Broker(format!(
                            "cannot open or create bucket {bucket}: {why}"
                        )));
                    }
                }
            }
        };
        Ok(Self { kv, bucket: bucket.to_owned(), timeout, requests: Default::default() })
    }

    /// Connects to `url` and opens `bucket`, which must exist: for readers
    /// that do not join the group (`squall group status`).
    ///
    /// # Errors
    /// The server cannot be reached, or the bucket does not exist.
    pub async fn attach(url: &str, bucket: &str, timeout: Duration) -> Result<Self, LeaseError> {
        let client = connect(url, timeout, "squall group status").await?;
        let mut js = async_nats::jetstream::new(client);
        js.set_timeout(timeout);
        let kv = js.get_key_value(bucket).await.map_err(|e| {
            LeaseError::Broker(format!(
                "no bucket {bucket} on {url} ({e}): no host of the group has run yet"
            ))
        })?;
        Ok(Self { kv, bucket: bucket.to_owned(), timeout, requests: Default::default() })
    }

    /// The key's revision, value and the broker's time of that revision
    /// (`None`: absent or deleted).
    ///
    /// # Errors
    /// The broker's.
    pub async fn entry(
        &self,
        key: &str,
    ) -> Result<Option<(u64, Bytes, std::time::SystemTime)>, LeaseError> {
        self.count();
        match self.bounded(self.kv.entry(key)).await? {
            Ok(Some(e)) if e.operation == kv::Operation::Put => {
                Ok(Some((e.revision, e.value, std::time::SystemTime::from(e.created))))
            }
            Ok(_) => Ok(None),
            Err(e) => Err(LeaseError::Broker(format!("read {key}: {e}"))),
        }
    }

    /// The count of requests sent to the broker, shared with its readers.
    pub fn requests(&self) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
        self.requests.clone()
    }

    /// Awaits one of the client's calls for at most twice the request
    /// timeout. The client bounds its requests itself; this is the keeper's
    /// guarantee that no call, whatever the client does, holds up its
    /// renewals for long.
    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = T>,
    ) -> Result<T, LeaseError> {
        tokio::time::timeout(self.timeout * 2, call)
            .await
            .map_err(|_| LeaseError::Broker(format!("no answer within {:?}", self.timeout * 2)))
    }

    fn count(&self) {
        self.requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The bucket's name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key's revision and value (`None`: absent or deleted).
    ///
    /// # Errors
    /// The broker's.
    pub async fn read(&self, key: &str) -> Result<Option<(u64, Bytes)>, LeaseError> {
        Ok(self.entry(key).await?.map(|(revision, value, _)| (revision, value)))
    }

    /// Writes `value` under `key` if the key is absent; its revision.
    ///
    /// # Errors
    /// [`LeaseError::Conflict`] when the key exists.
    pub async fn create(&self, key: &str, value: Bytes) -> Result<u64, LeaseError> {
        self.count();
        self.bounded(self.kv.create(key, value)).await?.map_err(|e| match e.kind() {
            kv::CreateErrorKind::AlreadyExists => LeaseError::Conflict,
            _ => LeaseError::Broker(format!("create {key}: {e}")),
        })
    }

    /// Writes `value` under `key` if its last revision is `revision`; the
    /// new revision.
    ///
    /// # Errors
    /// [`LeaseError::Conflict`] when the key changed since `revision`.
    pub async fn update(&self, key: &str, value: Bytes, revision: u64) -> Result<u64, LeaseError> {
        self.count();
        self.bounded(self.kv.update(key, value, revision)).await?.map_err(|e| match e.kind() {
            kv::UpdateErrorKind::WrongLastRevision => LeaseError::Conflict,
            _ => LeaseError::Broker(format!("update {key}: {e}")),
        })
    }

    /// Writes `value` under `key`, whatever it held.
    ///
    /// # Errors
    /// The broker's.
    pub async fn put(&self, key: &str, value: Bytes) -> Result<u64, LeaseError> {
        self.count();
        self.bounded(self.kv.put(key, value))
            .await?
            .map_err(|e| LeaseError::Broker(format!("put {key}: {e}")))
    }

    /// Every change written to the bucket from now on, as `(key, value)`
    /// (deletions are not used by the group, and are skipped). The stream
    /// ends when the broker's connection is lost for good; the caller
    /// watches again.
    ///
    /// # Errors
    /// The broker's.
    pub async fn watch(&self) -> Result<Changes, LeaseError> {
        self.count();
        let watch = self
            .bounded(self.kv.watch_all())
            .await?
            .map_err(|e| LeaseError::Broker(format!("watch: {e}")))?;
        Ok(Changes(watch))
    }

    /// Every key that starts with `prefix`, from the subjects the bucket's
    /// stream holds (one request per page of subjects). `prefix` is whole
    /// tokens ending in a dot, such as `h.`: the server matches it as a
    /// subject filter.
    ///
    /// Not the client's `keys()`: that reads an ordered consumer until a
    /// message says nothing is pending, and in a bucket whose keys are
    /// rewritten all the time (every renewal replaces its key's only
    /// revision) it listed some keys several times or missed others (see
    /// the test below), and its read has no time bound. In the group zombie
    /// test a keeper stopped at an await for 240 s, neither renewing nor
    /// leaving; this listing was its only call without a bound.
    ///
    /// # Errors
    /// The broker's, or no answer within twice the request timeout.
    pub async fn keys(&self, prefix: &str) -> Result<Vec<String>, LeaseError> {
        self.count();
        let broker = |e: &dyn std::fmt::Display| LeaseError::Broker(format!("list keys: {e}"));
        let filter = format!("{}{prefix}>", self.kv.prefix);
        let list = async {
            let mut subjects =
                self.kv.stream.info_with_subjects(&filter).await.map_err(|e| broker(&e))?;
            let mut out = Vec::new();
            while let Some(subject) = subjects.next().await {
                let (subject, _) = subject.map_err(|e| broker(&e))?;
                if let Some(key) = subject.strip_prefix(self.kv.prefix.as_str()) {
                    out.push(key.to_owned());
                }
            }
            out.sort();
            Ok(out)
        };
        self.bounded(list).await?
    }
}

/// The changes written to a bucket, from [`Leases::watch`].
pub struct Changes(kv::Watch);

impl std::fmt::Debug for Changes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Changes")
    }
}

impl Changes {
    /// The next key written, its revision and its value; `None` once the
    /// watch ended (the connection was lost for good, or a change could not
    /// be read: the caller watches again rather than skip one).
    pub async fn next(&mut self) -> Option<(String, u64, Bytes)> {
        loop {
            match self.0.next().await? {
                Ok(e) if e.operation == kv::Operation::Put => {
                    return Some((e.key, e.revision, e.value))
                }
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }
}

/// A client of `url` whose requests wait at most `timeout`.
///
/// # Errors
/// The server cannot be reached.
pub async fn connect(
    url: &str,
    timeout: Duration,
    name: &str,
) -> Result<async_nats::Client, LeaseError> {
    let options = async_nats::ConnectOptions::new()
        .connection_timeout(timeout)
        .request_timeout(Some(timeout))
        .name(name);
    async_nats::connect_with_options(url, options)
        .await
        .map_err(|e| LeaseError::Broker(format!("cannot connect to {url}: {e}")))
}

/// Partition `k`'s lease key.
pub fn partition_key(k: u32) -> String {
    format!("p.{k}")
}

/// Host `id`'s heartbeat key.
pub fn member_key(id: &str) -> String {
    format!("h.{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bucket of its own on the NATS server CI runs (127.0.0.1:4222);
    /// `None`, and the test says it is skipped, when there is none, except
    /// under `SQUALL_REQUIRE_TOOLS=1` (CI), where that fails the test.
    async fn bucket(timeout: Duration) -> Option<Leases> {
        let name = format!(
            "squall_lease_test_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        );
        match Leases::open("nats://127.0.0.1:4222", &name, timeout).await {
            Ok(leases) => Some(leases),
            Err(e) => {
                let why = format!("no NATS server with JetStream on 127.0.0.1:4222 ({e})");
                assert!(std::env::var("SQUALL_REQUIRE_TOOLS").as_deref() != Ok("1"), "{why}");
                eprintln!("skipped: {why}");
                None
            }
        }
    }

    /// Seen failing with the client's own `keys()` (an ordered consumer read
    /// until a message says nothing is pending), in 5 runs of 5, within 8
    /// to 17 listings: a listing taken while another host rewrote its keys
    /// held one key up to 5 times, or missed a live host's (`["h.a",
    /// "h.c"]`).
    #[test]
    fn a_key_listing_ends_while_another_host_rewrites_its_keys_and_after() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let timeout = Duration::from_millis(500);
        let Some(leases) = rt.block_on(bucket(timeout)) else { return };
        rt.block_on(async {
            for id in ["a", "b", "c"] {
                leases.put(&member_key(id), Bytes::from_static(b"alive")).await.unwrap();
            }
            for k in 0..8 {
                leases.put(&partition_key(k), Bytes::from_static(b"{}")).await.unwrap();
            }
        });
        // Another host: its own connection, rewriting every lease and its
        // heartbeat as fast as it can, for a while.
        let name = leases.bucket().to_owned();
        let writer = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let url = "nats://127.0.0.1:4222";
                let other = Leases::open(url, &name, timeout).await.unwrap();
                let until = std::time::Instant::now() + Duration::from_secs(3);
                while std::time::Instant::now() < until {
                    for k in 0..8 {
                        let _ = other.put(&partition_key(k), Bytes::from_static(b"{}")).await;
                    }
                    let _ = other.put(&member_key("b"), Bytes::from_static(b"alive")).await;
                }
            });
        });
        let expected = vec!["h.a".to_owned(), "h.b".to_owned(), "h.c".to_owned()];
        let mut listings = 0;
        rt.block_on(async {
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while std::time::Instant::now() < deadline {
                // Bounded here too, so the old way fails the test, not hangs it.
                let listed = tokio::time::timeout(Duration::from_secs(5), leases.keys("h."))
                    .await
                    .unwrap_or_else(|_| panic!("listing {listings} never ended"));
                assert_eq!(listed.unwrap(), expected, "listing {listings}");
                listings += 1;
            }
        });
        writer.join().unwrap();
        assert!(listings > 10, "only {listings} listings");
    }
}
