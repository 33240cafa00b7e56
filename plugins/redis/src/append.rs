//! [`StreamAppend`]: XADDs its inputs to a Redis stream in pipelines, and
//! acks each input after the server's reply.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use squall_plugin_api::host::metrics::{self, Counter};
use squall_plugin_api::prelude::*;

use crate::conn::{self, Timeouts};

squall_connector::connector_config! {
    /// The bolt's `config` table: the struct and its declared keys.
    #[derive(Debug, Clone, PartialEq)]
    struct AppendConfig {
        url: String = required(String, "redis://[user:password@]host[:port][/db]"),
        stream: String = required(String, "the stream to append to"),
        maxlen: Option<u64> = maybe(Integer, "XADD ... MAXLEN [~] n: cap the stream"),
        approx: bool = default(Bool, "true", "approximate trimming (~) with maxlen"),
        batch: usize = default(Integer, "100", "inputs per pipeline"),
        linger_ms: u64 = default(Integer, "50", "a partial batch is sent when its oldest input is this old"),
        fields: Option<Vec<String>> = maybe(Array, "only these input fields become entry fields (default all)"),
        timeout_ms: u64 = default(Integer, "5000", "reply timeout of a pipeline"),
        connect_timeout_ms: u64 = default(Integer, "5000", "how long prepare retries the first connection"),
    }
}

/// The bolt's counters.
#[derive(Debug)]
struct AppendMetrics {
    appended: Counter,
    failed: Counter,
}

/// XADDs one entry per input tuple to `stream`, with `MAXLEN [~] n` when
/// `maxlen` is set. Inputs are buffered and sent `batch` at a time in one
/// pipeline; each is acked after the pipeline's reply, or failed (so the
/// spout replays it) when the pipeline fails. A partial batch is sent when
/// its oldest input is `linger_ms` old at the next input, and at every tick
/// tuple: give the bolt `tick_tuple_freq_secs` so it flushes when input stops.
///
/// The entry's fields come from the input: a field whose value is a list
/// contributes its items as alternating names and values (this is how
/// [`StreamSpout`](crate::StreamSpout)'s `fields` travels); any other field
/// contributes its own name and value (strings and bytes as they are,
/// numbers and booleans as text, null as empty). `fields` restricts which
/// input fields are used. No outputs.
pub struct StreamAppend {
    config: AppendConfig,
    client: redis::Client,
    con: Option<redis::Connection>,
    /// The XADDs of the buffered inputs, built as they arrive.
    pipe: redis::Pipeline,
    /// The buffered inputs, in the pipeline's order.
    buffer: Vec<Anchor>,
    oldest: Option<Instant>,
    metrics: Option<AppendMetrics>,
    errors: u64,
}

impl std::fmt::Debug for StreamAppend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamAppend")
            .field("config", &self.config)
            .field("connected", &self.con.is_some())
            .field("buffered", &self.buffer.len())
            .finish_non_exhaustive()
    }
}

/// The bytes Redis stores for one tuple value; `None` for a list.
fn value_bytes(value: &Value) -> Option<Cow<'_, [u8]>> {
    if let Some(b) = value.as_bytes() {
        return Some(Cow::Borrowed(b));
    }
    if let Some(s) = value.as_str() {
        return Some(Cow::Borrowed(s.as_bytes()));
    }
    Some(Cow::Owned(match value {
        Value::Null => Vec::new(),
        Value::Bool(b) => b.to_string().into_bytes(),
        Value::I64(n) => n.to_string().into_bytes(),
        Value::U64(n) => n.to_string().into_bytes(),
        Value::F64(n) => n.to_string().into_bytes(),
        _ => return None,
    }))
}

/// One XADD field pair, borrowed from the input where it can be.
type Pair<'a> = (Cow<'a, [u8]>, Cow<'a, [u8]>);

/// The XADD field pairs of `input` (see [`StreamAppend`]).
fn pairs_of<'a>(input: &Tuple<'a>, only: Option<&[String]>) -> Result<Vec<Pair<'a>>> {
    let mut pairs = Vec::new();
    for (i, value) in input.values().iter().enumerate() {
        let name = input.fields().get(i).map(|f| f.as_str()).unwrap_or("");
        if let Some(only) = only {
            if !only.iter().any(|f| f == name) {
                continue;
            }
        }
        if let Some(list) = value.as_list() {
            if list.len() % 2 != 0 {
                return Err(format!(
                    "field {name:?} is a list of {} items; a list must hold name, value pairs",
                    list.len()
                )
                .into());
            }
            for pair in list.chunks_exact(2) {
                match (value_bytes(&pair[0]), value_bytes(&pair[1])) {
                    (Some(k), Some(v)) => pairs.push((k, v)),
                    _ => {
                        return Err(format!(
                            "field {name:?} holds a nested list; it cannot be stored"
                        )
                        .into())
                    }
                }
            }
        } else if let Some(v) = value_bytes(value) {
            if name.is_empty() {
                return Err(format!("value #{i} has no field name").into());
            }
            pairs.push((Cow::Borrowed(name.as_bytes()), v));
        }
    }
    if pairs.is_empty() {
        return Err("the input has no fields to append (XADD needs at least one)".into());
    }
    Ok(pairs)
}

impl StreamAppend {
    fn timeouts(&self) -> Timeouts {
        Timeouts {
            connect: Duration::from_millis(self.config.connect_timeout_ms),
            reply: Duration::from_millis(self.config.timeout_ms),
        }
    }

    /// Sends the buffer in one pipeline; acks every input on success, fails
    /// every input otherwise (the spout replays them).
    fn flush(&mut self, collector: &mut BoltCollector<'_>) {
        self.oldest = None;
        if self.buffer.is_empty() {
            return;
        }
        let pipe = std::mem::take(&mut self.pipe);
        let sent = self.send(&pipe);
        self.pipe = pipe;
        self.pipe.clear();
        let n = self.buffer.len() as u64;
        match sent {
            Ok(()) => {
                for anchor in self.buffer.drain(..) {
                    collector.ack(anchor);
                }
                if let Some(m) = &self.metrics {
                    m.appended.add(n);
                }
            }
            Err(e) => {
                self.errors += 1;
                if self.errors.is_power_of_two() || self.errors.is_multiple_of(100) {
                    squall_plugin_api::warn!(
                        "redis stream {:?}: XADD of {n} entries failed, inputs failed for replay: \
                         {e} (error #{})",
                        self.config.stream,
                        self.errors
                    );
                }
                for anchor in self.buffer.drain(..) {
                    collector.fail(anchor);
                }
                if let Some(m) = &self.metrics {
                    m.failed.add(n);
                }
            }
        }
    }

    /// One pipeline round trip, reconnecting once if the connection is gone.
    fn send(&mut self, pipe: &redis::Pipeline) -> std::result::Result<(), conn::ConnError> {
        if self.con.is_none() {
            let con = conn::connect_once(&self.client, self.timeouts(), Duration::ZERO)
                .map_err(conn::ConnError::Reconnect)?;
            self.con = Some(con);
        }
        let con = self.con.as_mut().expect("just set");
        match pipe.query::<redis::Value>(con) {
            Ok(_) => Ok(()),
            Err(e) => {
                if conn::is_connection_error(&e) {
                    self.con = None;
                }
                Err(conn::ConnError::Redis(e))
            }
        }
    }
}

impl Bolt for StreamAppend {
    const NAME: &'static str = "StreamAppend";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(AppendConfig::KEYS);
    const DESCRIPTION: &'static str =
        "XADDs each input to a Redis stream in pipelines; acks after the reply";

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = AppendConfig::parse(config)?;
        if config.stream.is_empty() {
            return Err("stream must not be empty".into());
        }
        if !(1..=100_000).contains(&config.batch) {
            return Err(format!("batch must be between 1 and 100000, got {}", config.batch).into());
        }
        if config.maxlen == Some(0) {
            return Err("maxlen must be at least 1".into());
        }
        if config.timeout_ms == 0 || config.connect_timeout_ms == 0 {
            return Err("timeout_ms and connect_timeout_ms must be at least 1".into());
        }
        let client = conn::client(&config.url)?;
        Ok(Self {
            config,
            client,
            con: None,
            pipe: redis::pipe(),
            buffer: Vec::new(),
            oldest: None,
            metrics: None,
            errors: 0,
        })
    }

    fn prepare(&mut self, _context: &TaskContext) -> Result<()> {
        let con = conn::connect_with_retry(&self.client, self.timeouts(), Duration::ZERO)?;
        self.con = Some(con);
        self.buffer.reserve(self.config.batch);
        self.metrics = Some(AppendMetrics {
            appended: metrics::counter("redis_appended", "Entries XADDed and acked."),
            failed: metrics::counter(
                "redis_append_failed",
                "Inputs failed because their XADD pipeline failed.",
            ),
        });
        Ok(())
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BoltCollector<'_>) -> Result<()> {
        if input.is_tick() {
            self.flush(collector);
            return Ok(());
        }
        // An input that cannot become an entry is failed by the host (Err).
        let pairs = pairs_of(input, self.config.fields.as_deref())?;
        let cmd = self.pipe.cmd("XADD").arg(&self.config.stream);
        if let Some(n) = self.config.maxlen {
            cmd.arg("MAXLEN");
            if self.config.approx {
                cmd.arg("~");
            }
            cmd.arg(n);
        }
        cmd.arg("*");
        for (k, v) in &pairs {
            cmd.arg(k.as_ref()).arg(v.as_ref());
        }
        self.buffer.push(input.anchor());
        let oldest = *self.oldest.get_or_insert_with(Instant::now);
        if self.buffer.len() >= self.config.batch
            || oldest.elapsed() >= Duration::from_millis(self.config.linger_ms)
        {
            self.flush(collector);
        }
        Ok(())
    }

    fn cleanup(&mut self) {
        // Inputs still buffered were failed back to the spout by the drain;
        // writing them now would only duplicate their replay.
        if !self.buffer.is_empty() {
            squall_plugin_api::info!(
                "redis stream {:?}: {} buffered inputs not appended at shutdown",
                self.config.stream,
                self.buffer.len()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use abi_stable::std_types::RString;

    use super::*;

    #[test]
    fn the_declared_defaults_are_the_ones_used() {
        let c = AppendConfig::parse(&ComponentConfig::new("url = \"redis://h/\"\nstream = \"o\""));
        let c = c.unwrap();
        assert_eq!((c.batch, c.linger_ms, c.approx, c.maxlen), (100, 50, true, None));
    }

    #[test]
    fn list_fields_splice_and_other_fields_keep_their_names() {
        let values = [
            Value::from("1-0"),
            Value::List(
                vec![Value::from("a"), Value::U64(1), Value::from("b"), Value::from("x")].into(),
            ),
        ];
        let fields = [RString::from("id"), RString::from("fields")];
        let input = Tuple::new(&values, &fields, "s", "default", 0, Anchor(1));
        let pairs = pairs_of(&input, None).unwrap();
        let text: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (String::from_utf8_lossy(k).into(), String::from_utf8_lossy(v).into()))
            .collect();
        assert_eq!(
            text,
            [("id", "1-0"), ("a", "1"), ("b", "x")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .to_vec()
        );
        let only = ["fields".to_owned()];
        assert_eq!(pairs_of(&input, Some(&only)).unwrap().len(), 2);
    }

    #[test]
    fn odd_lists_and_empty_inputs_are_refused() {
        let values = [Value::List(vec![Value::from("a")].into())];
        let fields = [RString::from("value")];
        let input = Tuple::new(&values, &fields, "s", "default", 0, Anchor(1));
        assert!(pairs_of(&input, None).unwrap_err().to_string().contains("pairs"));
        let empty = Tuple::new(&[], &[], "s", "default", 0, Anchor(1));
        assert!(pairs_of(&empty, None).is_err());
    }
}
