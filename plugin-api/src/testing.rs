//! Unit-testing helpers for plugin authors.
//!
//! [`Recorder`] plays the host's part: it records every emit, ack and fail a
//! component makes, so a spout or bolt can be tested as a plain struct:
//!
//! ```
//! use squall_plugin_api::prelude::*;
//! use squall_plugin_api::testing::Recorder;
//!
//! let mut recorder = Recorder::default();
//! {
//!     let mut collector = BasicCollector::new(recorder.output());
//!     collector.emit(&[Value::from("word")]);
//! }
//! assert_eq!(recorder.first_strings(), ["word"]);
//! ```
//!
//! [`check_config_keys`] checks a component's declared config keys against
//! the serde struct that reads its config, [`tick_tuple`] builds the tick
//! tuple a bolt with `tick_tuple_freq_secs` receives, and
//! [`check_state_backend`] runs the assertions every state backend passes.
//! [`put`], [`del`], [`writes`], [`loaded`] and [`pairs`] build a state
//! backend's commits and read its scopes back in a backend's own tests.

use abi_stable::{
    sabi_trait::TD_Opaque,
    sabi_types::RMut,
    std_types::{ROption, RSlice},
};

use serde::de::{self, DeserializeOwned, Visitor};

use crate::abi::{
    BoltOutput, BoltOutputMut, BoltOutput_TO, Output, OutputMut, Output_TO, ScopeWrites,
    SpoutOutput, SpoutOutputMut, SpoutOutput_TO, StateRecord,
};
use crate::{
    Anchor, ComponentConfig, ConfigKey, KeyKind, MessageId, Tuple, Value, SYSTEM_COMPONENT,
    TICK_STREAM,
};

/// One recorded emit.
#[derive(Debug, Clone, PartialEq)]
pub struct Emitted {
    /// The stream index (`u32::MAX` for the default stream).
    pub stream: u32,
    /// The values.
    pub values: Vec<Value>,
    /// The anchors (rich bolts).
    pub anchors: Vec<Anchor>,
    /// The message id (spouts).
    pub message_id: Option<MessageId>,
    /// The target task of an `emit_direct`.
    pub direct_task: Option<u32>,
}

/// An owned run of inputs for testing a bolt's `execute_batch`: it builds
/// the [`RunView`](crate::RunView) a contract 1.3 host hands over, from
/// one source component's task 1.
///
/// ```
/// use squall_plugin_api::prelude::*;
/// use squall_plugin_api::testing::{Recorder, TestRun};
///
/// let mut run = TestRun::new("sentences");
/// run.push(&[Value::from("a b")], Anchor::NONE).push(&[Value::from("c")], Anchor(7));
/// let mut taken = 0;
/// let mut inputs = run.inputs(&mut taken);
/// let arities: Vec<usize> = inputs.by_ref().map(|t| t.values().len()).collect();
/// assert_eq!((arities, taken), (vec![1, 1], 2));
/// assert_eq!(run.run().anchor(1), Anchor(7));
/// ```
#[derive(Debug, Clone)]
pub struct TestRun {
    component: String,
    streams: Vec<crate::InputStream>,
    values: Vec<Value>,
    headers: Vec<crate::InputHeader>,
    anchors: Vec<Anchor>,
    /// The output streams said to go nowhere, and the default stream.
    unwired: (Vec<u32>, bool),
}

impl TestRun {
    /// An empty run from `component`.
    pub fn new(component: &str) -> Self {
        Self {
            component: component.to_owned(),
            streams: Vec::new(),
            values: Vec::new(),
            headers: Vec::new(),
            anchors: Vec::new(),
            unwired: (Vec::new(), false),
        }
    }

    /// Says that `stream` goes nowhere, as a host does when no component
    /// subscribes to it and no tap watches ([`Run::wired`](crate::Run::wired)
    /// is then false for it).
    pub fn unwire(&mut self, stream: crate::StreamId) -> &mut Self {
        match stream {
            crate::StreamId::DEFAULT => self.unwired.1 = true,
            crate::StreamId(i) => self.unwired.0.push(i),
        }
        self
    }

    /// Appends an input on the default stream (no field names).
    pub fn push(&mut self, values: &[Value], anchor: Anchor) -> &mut Self {
        self.push_on(crate::DEFAULT_STREAM, &[], values, anchor)
    }

    /// Appends an input on stream `stream`, whose fields are `fields` (the
    /// first input of a stream names them).
    pub fn push_on(
        &mut self,
        stream: &str,
        fields: &[&str],
        values: &[Value],
        anchor: Anchor,
    ) -> &mut Self {
        let index = match self.streams.iter().position(|s| s.name.as_str() == stream) {
            Some(i) => i,
            None => {
                self.streams.push(crate::InputStream::new(stream, fields));
                self.streams.len() - 1
            }
        };
        self.values.extend_from_slice(values);
        self.headers.push(crate::InputHeader {
            stream: index as u32,
            values_end: self.values.len() as u32,
            ids_end: 0,
        });
        self.anchors.push(anchor);
        self
    }

    /// The view a host would hand over: no anchors when no input is
    /// tracked, as a host sends a run of a topology without ackers.
    pub fn view(&self) -> crate::RunView<'_> {
        let tracked = self.anchors.iter().any(|&a| a != Anchor::NONE);
        let anchors = if tracked { &self.anchors[..] } else { &[] };
        crate::RunView::new(
            &self.values,
            0,
            &self.headers,
            anchors,
            &self.streams,
            &self.component,
            1,
        )
        .with_unwired(self.unwired.0.iter().copied(), self.unwired.1)
    }

    /// Every input, as a [`Run`](crate::Run).
    pub fn run(&self) -> crate::Run<'_> {
        crate::Run::new(self.view())
    }

    /// The cursor `execute_batch` takes, counting into `taken`.
    pub fn inputs<'t>(&'t self, taken: &'t mut u32) -> crate::Inputs<'t, 't> {
        crate::Inputs::new(self.view(), taken)
    }
}

/// Records every call a component makes on its collector.
///
/// Hand [`Recorder::output`] to a collector (`SpoutCollector::new`,
/// `BoltCollector::new` or `BasicCollector::new`), or
/// [`Recorder::spout_output`] to `SpoutCollector::from_ext` (the contract
/// 1.1 spout output a host hands a spout, with `emit_many`), or
/// [`Recorder::bolt_output`] to `BoltCollector::from_bolt_output` or
/// `BasicCollector::from_bolt_output` (the contract 1.2 bolt output), call
/// the component, drop the collector, then read the fields.
#[derive(Debug, Default)]
pub struct Recorder {
    /// Every emit, in order.
    pub emitted: Vec<Emitted>,
    /// Every acked input.
    pub acked: Vec<Anchor>,
    /// Every failed input.
    pub failed: Vec<Anchor>,
    /// Every input whose timeout was reset.
    pub reset: Vec<Anchor>,
    /// The tuple count of every `emit_many` call, in order (its tuples are
    /// in [`emitted`](Self::emitted), one entry each).
    pub emit_many_calls: Vec<u32>,
    /// `emit_many` calls refused because their values, count and ids did
    /// not fit together (a host counts them as errors).
    pub refused: usize,
}

impl Recorder {
    /// The host-side object a collector wraps, e.g. `SpoutCollector::new(recorder.output())`.
    pub fn output(&mut self) -> OutputMut<'_> {
        Output_TO::from_ptr(RMut::new(self), TD_Opaque)
    }

    /// The contract 1.1 spout output a collector wraps, e.g.
    /// `SpoutCollector::from_ext(recorder.spout_output())`: `emit_many`
    /// arrives as one call. The recorder does not know the declared fields,
    /// so a call is refused only when its values do not split evenly into
    /// `count` tuples or its ids are neither none nor one per tuple.
    pub fn spout_output(&mut self) -> SpoutOutputMut<'_> {
        SpoutOutput_TO::from_ptr(RMut::new(self), TD_Opaque)
    }

    /// The contract 1.2 bolt output a collector wraps, e.g.
    /// `BoltCollector::from_bolt_output(recorder.bolt_output())`:
    /// `emit_many` arrives as one call, refused as
    /// [`spout_output`](Self::spout_output)'s is.
    pub fn bolt_output(&mut self) -> BoltOutputMut<'_> {
        BoltOutput_TO::from_ptr(RMut::new(self), TD_Opaque)
    }

    /// Records `count` tuples (`values` back to back) of one `emit_many`
    /// call, or counts the call as refused when they do not split evenly.
    fn record_many(
        &mut self,
        stream: u32,
        count: u32,
        values: &[Value],
        anchors: &[Anchor],
        message_ids: &[MessageId],
    ) {
        let n = count as usize;
        let fits = if n == 0 { values.is_empty() } else { values.len().is_multiple_of(n) };
        if !fits || !(message_ids.is_empty() || message_ids.len() == n) {
            self.refused += 1;
            return;
        }
        self.emit_many_calls.push(count);
        let arity = values.len().checked_div(n).unwrap_or(0);
        for i in 0..n {
            self.emitted.push(Emitted {
                stream,
                values: values[i * arity..(i + 1) * arity].to_vec(),
                anchors: anchors.to_vec(),
                message_id: message_ids.get(i).copied(),
                direct_task: None,
            });
        }
    }

    /// The first value of every emit, as strings.
    pub fn first_strings(&self) -> Vec<String> {
        self.emitted
            .iter()
            .map(|e| e.values.first().map(ToString::to_string).unwrap_or_default())
            .collect()
    }
}

impl Output for Recorder {
    fn emit(
        &mut self,
        stream: u32,
        values: RSlice<'_, Value>,
        anchors: RSlice<'_, Anchor>,
        message_id: ROption<MessageId>,
        direct_task: ROption<u32>,
    ) {
        self.emitted.push(Emitted {
            stream,
            values: values.to_vec(),
            anchors: anchors.to_vec(),
            message_id: message_id.into_option(),
            direct_task: direct_task.into_option(),
        });
    }

    fn ack(&mut self, anchor: Anchor) {
        self.acked.push(anchor);
    }

    fn fail(&mut self, anchor: Anchor) {
        self.failed.push(anchor);
    }

    fn reset_timeout(&mut self, anchor: Anchor) {
        self.reset.push(anchor);
    }
}

impl SpoutOutput for Recorder {
    fn emit(
        &mut self,
        stream: u32,
        values: RSlice<'_, Value>,
        message_id: ROption<MessageId>,
        direct_task: ROption<u32>,
    ) {
        Output::emit(self, stream, values, RSlice::default(), message_id, direct_task);
    }

    fn emit_many(
        &mut self,
        stream: u32,
        count: u32,
        values: RSlice<'_, Value>,
        message_ids: RSlice<'_, MessageId>,
    ) {
        self.record_many(stream, count, values.as_slice(), &[], message_ids.as_slice());
    }
}

impl BoltOutput for Recorder {
    fn emit(&mut self, stream: u32, values: RSlice<'_, Value>, anchors: RSlice<'_, Anchor>) {
        Output::emit(self, stream, values, anchors, ROption::RNone, ROption::RNone);
    }

    fn emit_direct(
        &mut self,
        stream: u32,
        task: u32,
        values: RSlice<'_, Value>,
        anchors: RSlice<'_, Anchor>,
    ) {
        Output::emit(self, stream, values, anchors, ROption::RNone, ROption::RSome(task));
    }

    fn emit_many(
        &mut self,
        stream: u32,
        count: u32,
        values: RSlice<'_, Value>,
        anchors: RSlice<'_, Anchor>,
    ) {
        self.record_many(stream, count, values.as_slice(), anchors.as_slice(), &[]);
    }

    fn ack(&mut self, anchor: Anchor) {
        Output::ack(self, anchor);
    }

    fn fail(&mut self, anchor: Anchor) {
        Output::fail(self, anchor);
    }

    fn reset_timeout(&mut self, anchor: Anchor) {
        Output::reset_timeout(self, anchor);
    }
}

/// The tick tuple the host sends a bolt every `tick_tuple_freq_secs`: no
/// values, from [`SYSTEM_COMPONENT`] on [`TICK_STREAM`], source task
/// `u32::MAX` (the host's system task), not anchored
/// ([`Tuple::is_tick`] is true).
///
/// ```
/// use squall_plugin_api::testing::tick_tuple;
///
/// let tick = tick_tuple();
/// assert!(tick.is_tick());
/// assert!(tick.values().is_empty());
/// ```
pub fn tick_tuple() -> Tuple<'static> {
    Tuple::new(&[], &[], SYSTEM_COMPONENT, TICK_STREAM, u32::MAX, Anchor::NONE)
}

/// Checks a component's declared config keys against `T`, the serde struct
/// its constructor reads the config into; an error says what does not match.
///
/// `samples` is a TOML document giving a valid value for every declared key
/// that has no default (required keys and keys declared with
/// [`ConfigKey::maybe`]); keys with a default are tried at their default. It
/// fails when:
/// - the keys are not declared (`None`), or a name is declared twice;
/// - the struct's fields and the declared names differ (a field added
///   without declaring it, or a declared key the struct does not read);
/// - a sample or default is not valid TOML, does not fit its declared
///   [`KeyKind`], or names no declared key;
/// - the config with every declared key does not parse;
/// - a required key is not required by the struct, or a key declared
///   optional is (the config without it does not parse);
/// - a declared default differs from the struct's own (`T` from the
///   required keys alone differs from `T` with every default written out);
/// - the struct accepts an undeclared key (it lacks
///   `#[serde(deny_unknown_fields)]`).
///
/// ```
/// use serde::Deserialize;
/// use squall_plugin_api::{testing::check_config_keys, ConfigKey, KeyKind};
///
/// #[derive(Debug, PartialEq, Deserialize)]
/// #[serde(deny_unknown_fields)]
/// struct Config {
///     path: String,
///     #[serde(default = "default_batch")]
///     batch: u32,
/// }
/// fn default_batch() -> u32 { 64 }
///
/// const KEYS: &[ConfigKey] = &[
///     ConfigKey::required("path", KeyKind::String, "the file to read"),
///     ConfigKey::optional("batch", KeyKind::Integer, "64", "lines per call"),
/// ];
/// check_config_keys::<Config>(Some(KEYS), r#"path = "in.txt""#).unwrap();
///
/// // A declared default that is not the struct's is caught.
/// const WRONG: &[ConfigKey] = &[
///     ConfigKey::required("path", KeyKind::String, "the file to read"),
///     ConfigKey::optional("batch", KeyKind::Integer, "32", "lines per call"),
/// ];
/// let err = check_config_keys::<Config>(Some(WRONG), r#"path = "in.txt""#).unwrap_err();
/// assert!(err.contains("default"), "{err}");
/// ```
///
/// # Errors
/// The first mismatch found, as a sentence.
pub fn check_config_keys<T>(
    keys: Option<&[ConfigKey]>,
    samples: &str,
) -> std::result::Result<(), String>
where
    T: DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let keys =
        keys.ok_or("the component does not declare its config keys (CONFIG_KEYS is None)")?;
    for (i, key) in keys.iter().enumerate() {
        if keys[..i].iter().any(|k| k.name == key.name) {
            return Err(format!("key \"{}\" is declared twice", key.name));
        }
    }
    check_field_names::<T>(keys)?;
    let samples: toml::Table =
        samples.parse().map_err(|e| format!("the samples are not a TOML table: {e}"))?;
    if let Some(name) = samples.keys().find(|s| !keys.iter().any(|k| k.name == s.as_str())) {
        return Err(format!("sample \"{name}\" names no declared key"));
    }
    let mut full = toml::Table::new();
    let mut required_only = toml::Table::new();
    let mut with_defaults = toml::Table::new();
    for key in keys {
        let default = key.default.map(|text| toml_value(key.name, text)).transpose()?;
        let value = match (samples.get(key.name), &default) {
            (Some(sample), _) => sample.clone(),
            (None, Some(default)) => default.clone(),
            (None, None) => {
                return Err(format!("give a sample value for \"{}\" (it has no default)", key.name))
            }
        };
        if !fits(key.kind, &value) {
            return Err(format!(
                "key \"{}\" is declared {} but its sample or default is {}",
                key.name,
                key.kind.name(),
                value.type_str()
            ));
        }
        full.insert(key.name.to_owned(), value.clone());
        if key.required {
            required_only.insert(key.name.to_owned(), value.clone());
            with_defaults.insert(key.name.to_owned(), value);
        } else if let Some(default) = default {
            with_defaults.insert(key.name.to_owned(), default);
        }
    }
    let parse = |table: &toml::Table| -> std::result::Result<T, String> {
        let text = toml::to_string(table).map_err(|e| e.to_string())?;
        ComponentConfig::new(&text).parse::<T>().map_err(|e| format!("{e} (config: {text:?})"))
    };
    parse(&full).map_err(|e| format!("a config with every declared key does not parse: {e}"))?;
    for key in keys {
        let mut without = full.clone();
        without.remove(key.name);
        match (key.required, parse(&without)) {
            (true, Ok(_)) => {
                return Err(format!(
                    "key \"{}\" is declared required, but the struct parses without it",
                    key.name
                ))
            }
            (false, Err(e)) => {
                return Err(format!(
                    "key \"{}\" is declared optional, but the struct needs it: {e}",
                    key.name
                ))
            }
            _ => {}
        }
    }
    let bare = parse(&required_only)?;
    let defaults = parse(&with_defaults)?;
    if bare != defaults {
        return Err(format!(
            "a declared default differs from the struct's: with the defaults written out \
             the config is {defaults:?}, without them {bare:?}"
        ));
    }
    let mut extra = full;
    extra.insert("__undeclared_key".to_owned(), toml::Value::Boolean(true));
    if parse(&extra).is_ok() {
        return Err(
            "the struct accepts an undeclared key: add #[serde(deny_unknown_fields)]".into()
        );
    }
    Ok(())
}

/// Parses one TOML value written as text (a declared default).
fn toml_value(name: &str, text: &str) -> std::result::Result<toml::Value, String> {
    let mut table: toml::Table = format!("v = {text}")
        .parse()
        .map_err(|e| format!("the default of \"{name}\" ({text}) is not a TOML value: {e}"))?;
    table.remove("v").ok_or_else(|| format!("the default of \"{name}\" is empty"))
}

/// True when a TOML value fits a declared key type (as `squall validate`
/// checks it).
fn fits(kind: KeyKind, value: &toml::Value) -> bool {
    match kind {
        KeyKind::Any => true,
        KeyKind::String | KeyKind::Duration => value.is_str(),
        KeyKind::Integer => value.is_integer(),
        KeyKind::Float => value.is_float() || value.is_integer(),
        KeyKind::Bool => value.is_bool(),
        KeyKind::Array => value.is_array(),
        KeyKind::Table => value.is_table(),
    }
}

/// Compares the struct's field names with the declared key names.
fn check_field_names<T: DeserializeOwned>(keys: &[ConfigKey]) -> std::result::Result<(), String> {
    let mut fields = None;
    // The deserializer only records the field list serde hands it and then
    // stops, so this error is expected.
    let _ = T::deserialize(FieldNames(&mut fields));
    let fields = fields.ok_or(
        "the config type is not a plain struct (serde did not list its fields; \
         `flatten` hides them)",
    )?;
    let undeclared: Vec<&str> =
        fields.iter().copied().filter(|f| !keys.iter().any(|k| k.name == *f)).collect();
    if !undeclared.is_empty() {
        return Err(format!("the struct reads undeclared key(s): {}", undeclared.join(", ")));
    }
    let unread: Vec<&str> =
        keys.iter().map(|k| k.name).filter(|name| !fields.contains(name)).collect();
    if !unread.is_empty() {
        return Err(format!("declared key(s) the struct does not read: {}", unread.join(", ")));
    }
    Ok(())
}

/// A deserializer that records the field names a derived struct asks for.
struct FieldNames<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> de::Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(
        self,
        _visitor: V,
    ) -> std::result::Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> std::result::Result<V::Value, Self::Error> {
        *self.0 = Some(fields);
        Err(de::Error::custom("field names recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// A record that sets `key` to `value`, for a state backend's commit.
pub fn put(key: &str, value: &str) -> StateRecord {
    StateRecord {
        key: key.as_bytes().to_vec().into(),
        value: ROption::RSome(value.as_bytes().to_vec().into()),
    }
}

/// A record that deletes `key`, for a state backend's commit.
pub fn del(key: &str) -> StateRecord {
    StateRecord { key: key.as_bytes().to_vec().into(), value: ROption::RNone }
}

/// The writes of one scope in a commit.
pub fn writes(scope: &str, records: Vec<StateRecord>) -> ScopeWrites {
    ScopeWrites { scope: scope.into(), records: records.into() }
}

/// `(key, value)` text pairs, as [`loaded`] returns them.
pub fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// The committed records of `scope` as `(key, value)` text pairs, sorted.
///
/// # Panics
/// The load failed, returned a record without a value, or a key or value
/// that is not UTF-8 (the message says which).
pub fn loaded<B: crate::StateBackend>(backend: &mut B, scope: &str) -> Vec<(String, String)> {
    try_loaded(backend, scope).unwrap_or_else(|e| panic!("{e}"))
}

/// [`loaded`], with a sentence for an error instead of a panic.
fn try_loaded<B: crate::StateBackend>(
    backend: &mut B,
    scope: &str,
) -> std::result::Result<Vec<(String, String)>, String> {
    let text = |bytes: Vec<u8>| {
        String::from_utf8(bytes).map_err(|e| format!("load({scope:?}): not UTF-8: {e}"))
    };
    let mut out = Vec::new();
    for r in backend.load(scope).map_err(|e| format!("load({scope:?}): {e}"))? {
        let ROption::RSome(v) = r.value else {
            return Err(format!("load({scope:?}) returned a record without a value"));
        };
        out.push((text(r.key.into_vec())?, text(v.into_vec())?));
    }
    out.sort();
    Ok(out)
}

/// The assertions every state backend must pass, shared by the backends'
/// own tests (the embedded, Redis and PostgreSQL backends run it): a
/// round trip of records and checkpoint numbers, binary keys and values,
/// deletes (the later write of a key wins within a commit; a scope emptied
/// by deletes is no longer listed), the refusal of a checkpoint not above
/// the last committed one (nothing of it written), and `clear` of one
/// namespace leaving another intact.
///
/// `open(name)` returns a backend already opened on a namespace of its
/// own for `name` (the suite asks for `"round-trip"`, `"deletes"`,
/// `"fenced"`, `"clear-a"` and `"clear-b"`; make them unique per run, and
/// remove them afterwards when the store outlives the test).
///
/// # Errors
/// The first assertion that failed, as a sentence naming the check.
pub fn check_state_backend<B: crate::StateBackend>(
    mut open: impl FnMut(&str) -> B,
) -> std::result::Result<(), String> {
    macro_rules! ok {
        ($call:expr, $what:expr) => {
            $call.map_err(|e| format!("{}: {e}", $what))?
        };
    }
    macro_rules! same {
        ($got:expr, $want:expr, $what:expr) => {{
            let (got, want) = ($got, $want);
            if got != want {
                return Err(format!("{}: got {got:?}, expected {want:?}", $what));
            }
        }};
    }

    // Round trip.
    let b = &mut open("round-trip");
    same!(ok!(b.last_committed(), "last_committed of a new namespace"), None, "a new namespace");
    same!(ok!(b.scopes(), "scopes"), Vec::<String>::new(), "scopes of a new namespace");
    same!(try_loaded(b, "count/words")?, pairs(&[]), "load of an unknown scope");
    ok!(
        b.commit(
            1,
            &[
                writes("count/words", vec![put("a", "1"), put("b", "2")]),
                writes("spout/$position", vec![put("0", "p1")]),
            ],
        ),
        "commit 1"
    );
    same!(ok!(b.last_committed(), "last_committed"), Some(1), "after commit 1");
    same!(ok!(b.scopes(), "scopes"), ["count/words", "spout/$position"], "scopes after commit 1");
    same!(try_loaded(b, "count/words")?, pairs(&[("a", "1"), ("b", "2")]), "count/words after 1");
    ok!(b.commit(2, &[writes("count/words", vec![put("a", "3"), put("c", "4")])]), "commit 2");
    same!(ok!(b.last_committed(), "last_committed"), Some(2), "after commit 2");
    same!(
        try_loaded(b, "count/words")?,
        pairs(&[("a", "3"), ("b", "2"), ("c", "4")]),
        "count/words after 2 (an incremental commit)"
    );
    same!(try_loaded(b, "spout/$position")?, pairs(&[("0", "p1")]), "a scope commit 2 left alone");
    ok!(b.commit(3, &[]), "commit 3, with no writes");
    same!(ok!(b.last_committed(), "last_committed"), Some(3), "a commit with no writes");
    let bin =
        StateRecord { key: vec![0, 255, 10].into(), value: ROption::RSome(vec![0, 0, 13].into()) };
    ok!(b.commit(4, &[writes("bin", vec![bin.clone()])]), "commit 4, binary");
    same!(ok!(b.load("bin"), "load"), vec![bin], "binary keys and values");

    // Deletes.
    let b = &mut open("deletes");
    ok!(
        b.commit(
            1,
            &[writes("s", vec![put("a", "1"), put("b", "2")]), writes("t", vec![put("x", "1")])],
        ),
        "commit 1"
    );
    ok!(b.commit(2, &[writes("s", vec![del("a"), del("never")])]), "commit 2, deletes");
    same!(try_loaded(b, "s")?, pairs(&[("b", "2")]), "after deletes");
    ok!(
        b.commit(
            3,
            &[writes("s", vec![put("k", "1"), del("k"), put("j", "1"), del("j"), put("j", "2")])],
        ),
        "commit 3"
    );
    same!(try_loaded(b, "s")?, pairs(&[("b", "2"), ("j", "2")]), "the later write of a key wins");
    ok!(b.commit(4, &[writes("t", vec![del("x")])]), "commit 4");
    same!(ok!(b.scopes(), "scopes"), ["s"], "a scope whose last record was deleted");
    same!(try_loaded(b, "t")?, pairs(&[]), "a scope whose last record was deleted");

    // Fencing: a number not above the last committed one writes nothing.
    let b = &mut open("fenced");
    ok!(b.commit(5 << 32, &[writes("a", vec![put("k", "new")])]), "a high first commit");
    for late in [3, 5 << 32] {
        if b.commit(late, &[writes("a", vec![put("k", "old")])]).is_ok() {
            return Err(format!("commit {late} after {} was accepted", 5_u64 << 32));
        }
    }
    same!(ok!(b.last_committed(), "last_committed"), Some(5 << 32), "after refused commits");
    same!(try_loaded(b, "a")?, pairs(&[("k", "new")]), "a refused commit's writes");
    ok!(b.commit((5 << 32) + 1, &[writes("a", vec![put("k", "next")])]), "the next commit");
    same!(try_loaded(b, "a")?, pairs(&[("k", "next")]), "after the next commit");

    // Clear deletes one namespace only.
    let mut a = open("clear-a");
    let mut other = open("clear-b");
    ok!(a.commit(1, &[writes("s", vec![put("k", "a")])]), "commit in clear-a");
    ok!(other.commit(7, &[writes("s", vec![put("k", "b")])]), "commit in clear-b");
    ok!(a.clear(), "clear");
    same!(ok!(a.last_committed(), "last_committed"), None, "a cleared namespace");
    same!(ok!(a.scopes(), "scopes"), Vec::<String>::new(), "scopes of a cleared namespace");
    same!(try_loaded(&mut a, "s")?, pairs(&[]), "a cleared namespace's scope");
    same!(ok!(other.last_committed(), "last_committed"), Some(7), "another namespace");
    same!(try_loaded(&mut other, "s")?, pairs(&[("k", "b")]), "another namespace's scope");
    ok!(a.commit(1, &[writes("s", vec![put("k", "again")])]), "commit 1 after clear");
    same!(try_loaded(&mut a, "s")?, pairs(&[("k", "again")]), "after clear and commit 1");
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Conf {
        path: String,
        #[serde(default = "three")]
        count: u32,
        #[serde(default)]
        limit: Option<u64>,
    }

    fn three() -> u32 {
        3
    }

    const PATH: ConfigKey = ConfigKey::required("path", KeyKind::String, "a path");
    const COUNT: ConfigKey = ConfigKey::optional("count", KeyKind::Integer, "3", "a count");
    const LIMIT: ConfigKey = ConfigKey::maybe("limit", KeyKind::Integer, "a limit");
    const SAMPLES: &str = "path = \"p\"\nlimit = 9";

    fn check(keys: &[ConfigKey], samples: &str) -> std::result::Result<(), String> {
        check_config_keys::<Conf>(Some(keys), samples)
    }

    #[test]
    fn matching_keys_pass() {
        check(&[PATH, COUNT, LIMIT], SAMPLES).unwrap();
    }

    #[test]
    fn each_kind_of_mismatch_is_caught() {
        let cases: &[(&[ConfigKey], &str, &str)] = &[
            (&[PATH, COUNT], "path = \"p\"", "undeclared key(s): limit"),
            (
                &[PATH, COUNT, LIMIT, ConfigKey::maybe("x", KeyKind::Bool, "")],
                "path = \"p\"\nlimit = 1\nx = true",
                "does not read: x",
            ),
            (&[PATH, COUNT, LIMIT], "path = \"p\"", "sample value for \"limit\""),
            (&[PATH, COUNT, LIMIT], "path = 1\nlimit = 9", "declared string"),
            (&[PATH, COUNT, LIMIT], "path = \"p\"\nlimit = 9\nnope = 1", "names no declared key"),
            (
                &[ConfigKey::maybe("path", KeyKind::String, ""), COUNT, LIMIT],
                SAMPLES,
                "struct needs it",
            ),
            (
                &[PATH, ConfigKey::required("count", KeyKind::Integer, ""), LIMIT],
                "path = \"p\"\nlimit = 9\ncount = 1",
                "parses without it",
            ),
            (
                &[PATH, ConfigKey::optional("count", KeyKind::Integer, "4", ""), LIMIT],
                SAMPLES,
                "default differs",
            ),
            (&[PATH, PATH, COUNT, LIMIT], SAMPLES, "declared twice"),
        ];
        for (keys, samples, expected) in cases {
            let err = check(keys, samples).unwrap_err();
            assert!(err.contains(expected), "expected {expected:?} in {err:?}");
        }
        let err = check_config_keys::<Conf>(None, SAMPLES).unwrap_err();
        assert!(err.contains("does not declare"), "{err}");
    }

    #[test]
    fn a_struct_without_deny_unknown_fields_is_caught() {
        #[derive(Debug, PartialEq, Deserialize)]
        struct Lax {
            #[serde(default)]
            on: bool,
        }
        let keys = [ConfigKey::optional("on", KeyKind::Bool, "false", "")];
        let err = check_config_keys::<Lax>(Some(&keys), "").unwrap_err();
        assert!(err.contains("deny_unknown_fields"), "{err}");
    }

    #[test]
    fn the_tick_tuple_is_a_tick() {
        let tick = tick_tuple();
        assert!(tick.is_tick());
        assert_eq!(tick.source_component(), SYSTEM_COMPONENT);
        assert_eq!(tick.source_stream(), TICK_STREAM);
    }
}
