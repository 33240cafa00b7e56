//! [`EntryField`]: one field of a [`StreamSpout`](crate::StreamSpout) entry
//! as a tuple of its own.

use serde::Deserialize;
use squall_plugin_api::prelude::*;

/// The bolt's `config` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldConfig {
    field: String,
}

/// Emits the value of the entry field named `field` on `["value"]`,
/// anchored to its input (a basic bolt): the bridge from a stream entry to
/// bolts that read their input's first value, such as the word count's
/// `SplitSentence`. It looks in the input's `fields` list (name, value
/// pairs); an entry without that field fails its input, which then follows
/// the spout's `max_deliver` and dead-letter path.
#[derive(Debug)]
pub struct EntryField {
    field: String,
}

impl BasicBolt for EntryField {
    const NAME: &'static str = "EntryField";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[ConfigKey::required(
        "field",
        KeyKind::String,
        "the entry field whose value is emitted",
    )]);
    const DESCRIPTION: &'static str = "emits one named field of a stream entry";

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: FieldConfig = config.parse()?;
        if config.field.is_empty() {
            return Err("field must not be empty".into());
        }
        Ok(Self { field: config.field })
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        let list = input.field("fields").and_then(Value::as_list).ok_or_else(|| {
            "the input has no `fields` list (is it from redis::StreamSpout?)".to_owned()
        })?;
        let value = list
            .chunks_exact(2)
            .find(|pair| pair[0].as_str() == Some(self.field.as_str()))
            .map(|pair| &pair[1])
            .ok_or_else(|| format!("the entry has no field {:?}", self.field))?;
        collector.emit(std::slice::from_ref(value));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::testing::check_config_keys;

    use super::*;

    #[test]
    fn declared_keys_match_the_config_struct() {
        check_config_keys::<FieldConfig>(EntryField::CONFIG_KEYS, r#"field = "body""#).unwrap();
    }
}
