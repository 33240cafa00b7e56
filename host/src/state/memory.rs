//! The host's in-memory state backend: for tests, and for topologies that
//! want checkpoints without a server. It lives as long as the process.

use std::collections::{BTreeMap, HashMap};

use abi_stable::std_types::ROption;
use squall_plugin_api::abi::{ScopeWrites, StateRecord};

/// Committed records by scope, and the last committed checkpoint.
#[derive(Debug, Default)]
pub struct MemoryBackend {
    namespace: String,
    scopes: BTreeMap<String, HashMap<Vec<u8>, Vec<u8>>>,
    last: Option<u64>,
}

impl MemoryBackend {
    pub(super) fn open(&mut self, namespace: &str) {
        self.namespace = namespace.to_owned();
    }

    pub(super) fn last_committed(&self) -> Option<u64> {
        self.last
    }

    pub(super) fn commit(&mut self, checkpoint: u64, writes: &[ScopeWrites]) {
        for w in writes {
            let scope = self.scopes.entry(w.scope.to_string()).or_default();
            for r in w.records.iter() {
                match &r.value {
                    ROption::RSome(v) => {
                        scope.insert(r.key.to_vec(), v.to_vec());
                    }
                    ROption::RNone => {
                        scope.remove(r.key.as_slice());
                    }
                }
            }
        }
        self.scopes.retain(|_, records| !records.is_empty());
        self.last = Some(checkpoint);
    }

    pub(super) fn load(&self, scope: &str) -> Vec<StateRecord> {
        self.scopes.get(scope).map_or_else(Vec::new, |records| {
            records
                .iter()
                .map(|(k, v)| StateRecord {
                    key: k.clone().into(),
                    value: ROption::RSome(v.clone().into()),
                })
                .collect()
        })
    }

    pub(super) fn scopes(&self) -> Vec<String> {
        self.scopes.keys().cloned().collect()
    }

    pub(super) fn clear(&mut self) {
        self.scopes.clear();
        self.last = None;
    }
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::abi::{ScopeWrites, StateRecord};
    use squall_plugin_api::{ComponentConfig, Result, StateBackend};

    use super::MemoryBackend;
    use crate::state::Backend;

    /// The memory backend as the host drives it (fencing included), behind
    /// the plugin trait, so it runs the suite every plugin backend runs.
    struct Memory(Backend);

    impl StateBackend for Memory {
        const NAME: &'static str = "memory";

        fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
            Ok(Memory(Backend::Memory(MemoryBackend::default())))
        }

        fn open(&mut self, namespace: &str) -> Result<()> {
            self.0.open(namespace).map_err(Into::into)
        }

        fn last_committed(&mut self) -> Result<Option<u64>> {
            self.0.last_committed().map_err(Into::into)
        }

        fn commit(&mut self, checkpoint: u64, writes: &[ScopeWrites]) -> Result<()> {
            self.0.commit(checkpoint, writes).map_err(Into::into)
        }

        fn load(&mut self, scope: &str) -> Result<Vec<StateRecord>> {
            self.0.load(scope).map_err(Into::into)
        }

        fn scopes(&mut self) -> Result<Vec<String>> {
            self.0.scopes().map_err(Into::into)
        }

        fn clear(&mut self) -> Result<()> {
            self.0.clear().map_err(Into::into)
        }
    }

    #[test]
    fn passes_the_shared_backend_suite() {
        squall_plugin_api::testing::check_state_backend(|name| {
            let mut memory = Memory::new(&ComponentConfig::new("")).unwrap();
            memory.open(name).unwrap();
            memory
        })
        .unwrap();
    }
}
