//! A third-party-style wait strategy plugin for squall: exponential backoff.
//!
//! # Overview
//! [`ExponentialBackoff`] spins for the first `spin_count` idle calls, then
//! sleeps, doubling the sleep on every further idle call from
//! `min_sleep_micros` up to `max_sleep_micros`. The executor resets the
//! counter to 0 as soon as it has work again, so a busy thread never sleeps
//! and an idle one settles at one wake-up per `max_sleep_micros`.
//!
//! [`Backoff`] is the pure core: [`Backoff::step`] maps a counter to
//! what `idle` does.
//!
//! # Example
//! ```toml
//! [plugins]
//! extra = "../target/release/libsquall_wait_extra.so"
//!
//! [wait.backpressure]
//! strategy = "extra::ExponentialBackoff"
//! spin_count = 10          # idle calls that only spin (default 10)
//! min_sleep_micros = 1     # first sleep (default 1)
//! max_sleep_micros = 1000  # the sleep never exceeds this (default 1000)
//! ```

#![warn(missing_docs)]

use std::time::Duration;

use serde::Deserialize;
use squall_plugin_api::prelude::*;

/// The `[wait.*]` keys `ExponentialBackoff` reads (all optional).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackoffConfig {
    /// Idle calls that spin (a CPU pause hint) before the first sleep.
    #[serde(default = "default_spin_count")]
    pub spin_count: u32,
    /// The first sleep, in microseconds. A sleep of 0 yields the thread instead.
    #[serde(default = "default_min_sleep_micros")]
    pub min_sleep_micros: u64,
    /// The longest sleep, in microseconds; must be at least `min_sleep_micros`.
    #[serde(default = "default_max_sleep_micros")]
    pub max_sleep_micros: u64,
}

fn default_spin_count() -> u32 {
    10
}

fn default_min_sleep_micros() -> u64 {
    1
}

fn default_max_sleep_micros() -> u64 {
    1000
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            spin_count: default_spin_count(),
            min_sleep_micros: default_min_sleep_micros(),
            max_sleep_micros: default_max_sleep_micros(),
        }
    }
}

/// What one idle call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Issue a CPU spin-loop hint and return at once.
    Spin,
    /// Sleep this many microseconds (0: yield the thread).
    SleepMicros(u64),
}

/// The validated backoff schedule: a pure function from counter to [`Step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    spin_count: u32,
    min_sleep_micros: u64,
    max_sleep_micros: u64,
}

impl Backoff {
    /// Validates a config.
    ///
    /// # Errors
    /// When `max_sleep_micros` is less than `min_sleep_micros`.
    pub fn new(config: &BackoffConfig) -> Result<Self> {
        if config.max_sleep_micros < config.min_sleep_micros {
            return Err(format!(
                "max_sleep_micros ({}) must be at least min_sleep_micros ({})",
                config.max_sleep_micros, config.min_sleep_micros
            )
            .into());
        }
        Ok(Self {
            spin_count: config.spin_count,
            min_sleep_micros: config.min_sleep_micros,
            max_sleep_micros: config.max_sleep_micros,
        })
    }

    /// What the idle call with this counter does: spin while
    /// `counter < spin_count`, then sleep
    /// `min(min_sleep_micros * 2^(counter - spin_count), max_sleep_micros)`,
    /// computed without overflow.
    pub fn step(&self, counter: u32) -> Step {
        let Some(doublings) = counter.checked_sub(self.spin_count) else {
            return Step::Spin;
        };
        // 2^doublings saturates at u64::MAX once it no longer fits; the
        // product saturates too, and `min` brings it back under the cap.
        let factor = 1u64.checked_shl(doublings).unwrap_or(u64::MAX);
        Step::SleepMicros(self.min_sleep_micros.saturating_mul(factor).min(self.max_sleep_micros))
    }
}

/// Spins, then sleeps with exponentially growing pauses up to a cap.
#[derive(Debug)]
pub struct ExponentialBackoff {
    backoff: Backoff,
}

impl WaitStrategy for ExponentialBackoff {
    const NAME: &'static str = "ExponentialBackoff";
    const DESCRIPTION: &'static str =
        "spins spin_count times, then sleeps min_sleep_micros doubling up to max_sleep_micros";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[
        ConfigKey::optional(
            "spin_count",
            KeyKind::Integer,
            "10",
            "idle calls that only spin before the first sleep",
        ),
        ConfigKey::optional(
            "min_sleep_micros",
            KeyKind::Integer,
            "1",
            "the first sleep in microseconds (0 yields the thread)",
        ),
        ConfigKey::optional(
            "max_sleep_micros",
            KeyKind::Integer,
            "1000",
            "the longest sleep in microseconds (at least min_sleep_micros)",
        ),
    ]);

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: BackoffConfig = config.parse()?;
        Ok(Self { backoff: Backoff::new(&config)? })
    }

    fn idle(&mut self, counter: u32) -> u32 {
        match self.backoff.step(counter) {
            Step::Spin => std::hint::spin_loop(),
            Step::SleepMicros(0) => std::thread::yield_now(),
            Step::SleepMicros(micros) => std::thread::sleep(Duration::from_micros(micros)),
        }
        counter.saturating_add(1)
    }
}

squall_plugin_api::export_plugin! {
    wait_strategies: [ExponentialBackoff],
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::abi::{ComponentKind, PluginSource};

    use super::*;

    #[test]
    fn declared_config_keys_match_the_config_struct() {
        squall_plugin_api::testing::check_config_keys::<BackoffConfig>(
            ExponentialBackoff::CONFIG_KEYS,
            "",
        )
        .unwrap();
    }

    fn parse(text: &str) -> Result<BackoffConfig> {
        ComponentConfig::new(text).parse()
    }

    #[test]
    fn empty_config_gives_the_defaults() {
        let config = parse("").unwrap();
        assert_eq!(
            config,
            BackoffConfig { spin_count: 10, min_sleep_micros: 1, max_sleep_micros: 1000 }
        );
    }

    #[test]
    fn unknown_key_is_a_config_error() {
        let err = parse("max_sleep_micro = 5").unwrap_err().to_string();
        assert!(err.contains("unknown field `max_sleep_micro`"), "{err}");
    }

    #[test]
    fn max_below_min_is_refused() {
        let err = ExponentialBackoff::new(&ComponentConfig::new(
            "min_sleep_micros = 10\nmax_sleep_micros = 5",
        ))
        .unwrap_err()
        .to_string();
        assert_eq!(err, "max_sleep_micros (5) must be at least min_sleep_micros (10)");
    }

    #[test]
    fn step_spins_then_doubles_up_to_the_cap() {
        let table: &[(BackoffConfig, u32, Step)] = &[
            (BackoffConfig::default(), 0, Step::Spin),
            (BackoffConfig::default(), 9, Step::Spin),
            (BackoffConfig::default(), 10, Step::SleepMicros(1)),
            (BackoffConfig::default(), 11, Step::SleepMicros(2)),
            (BackoffConfig::default(), 19, Step::SleepMicros(512)),
            (BackoffConfig::default(), 20, Step::SleepMicros(1000)),
            (BackoffConfig::default(), 74, Step::SleepMicros(1000)),
            (BackoffConfig::default(), u32::MAX, Step::SleepMicros(1000)),
            (
                BackoffConfig { spin_count: 0, min_sleep_micros: 3, max_sleep_micros: 100 },
                0,
                Step::SleepMicros(3),
            ),
            (
                BackoffConfig { spin_count: 0, min_sleep_micros: 3, max_sleep_micros: 100 },
                5,
                Step::SleepMicros(96),
            ),
            (
                BackoffConfig { spin_count: 0, min_sleep_micros: 3, max_sleep_micros: 100 },
                6,
                Step::SleepMicros(100),
            ),
            // Overflow: 2^63 * 7 and 2^64 saturate, then the cap applies.
            (
                BackoffConfig { spin_count: 0, min_sleep_micros: 7, max_sleep_micros: u64::MAX },
                63,
                Step::SleepMicros(u64::MAX),
            ),
            (
                BackoffConfig { spin_count: 0, min_sleep_micros: 1, max_sleep_micros: u64::MAX },
                64,
                Step::SleepMicros(u64::MAX),
            ),
            (
                BackoffConfig { spin_count: 0, min_sleep_micros: 0, max_sleep_micros: 0 },
                100,
                Step::SleepMicros(0),
            ),
            (
                BackoffConfig { spin_count: u32::MAX, min_sleep_micros: 1, max_sleep_micros: 1 },
                u32::MAX - 1,
                Step::Spin,
            ),
            (
                BackoffConfig { spin_count: u32::MAX, min_sleep_micros: 1, max_sleep_micros: 1 },
                u32::MAX,
                Step::SleepMicros(1),
            ),
        ];
        for (config, counter, expected) in table {
            let backoff = Backoff::new(config).unwrap();
            assert_eq!(backoff.step(*counter), *expected, "{config:?} counter {counter}");
        }
    }

    #[test]
    fn idle_returns_the_next_counter_and_saturates() {
        let mut wait =
            ExponentialBackoff::new(&ComponentConfig::new("spin_count = 2\nmax_sleep_micros = 1"))
                .unwrap();
        assert_eq!(wait.idle(0), 1);
        assert_eq!(wait.idle(1), 2);
        assert_eq!(wait.idle(2), 3);
        assert_eq!(wait.idle(u32::MAX), u32::MAX);
    }

    #[test]
    fn catalogue_lists_the_strategy() {
        let catalogue = __SquallPlugin::catalogue();
        assert_eq!(catalogue.plugin.as_str(), "squall-wait-extra");
        assert_eq!(catalogue.components.len(), 1);
        let component = &catalogue.components[0];
        assert_eq!(component.kind, ComponentKind::WAIT_STRATEGY);
        assert_eq!(component.name.as_str(), "ExponentialBackoff");
        assert!(component.outputs.is_empty());
    }
}
