//! The scenario a command names (a file or a bundled one) and what the command line sets on it.

use super::FaultArgs;
use crate::inventory::{Defect, Strategy};
use crate::shop::ShopKnobs;
use crate::traffic::scenario::{Scenario, ScenarioError};
use std::path::PathBuf;

/// Loads `--scenario`: a file, or a bundled scenario by name (a bad scenario: exit 2 with the
/// file and field named). Says which on stderr; returns it and how reports name its origin.
pub fn load_scenario(arg: &std::path::Path) -> Result<(Scenario, PathBuf), ScenarioError> {
    let (scenario, source) = crate::scenarios::resolve(arg)?;
    crate::console::eoutln!("{}", source.describe());
    Ok((scenario, source.origin()))
}

/// With a defect asked for (`--defect`, `[shop] defect`): refuses it when a strategy lacks it
/// (naming the ones that have it), else prints the loud warning on stderr.
pub fn defect_warning(
    knobs: &ShopKnobs,
    strategies: impl IntoIterator<Item = Strategy>,
) -> anyhow::Result<()> {
    let Some(defect) = knobs.defect else {
        return Ok(());
    };
    for strategy in strategies {
        knobs.check_defect(strategy)?;
        crate::console::eoutln!("{}", defect.warning(strategy));
    }
    Ok(())
}

/// The shop flags a command line sets on its scenario (`run`, `compare`, their dry runs,
/// `gate`): `--fault`s added, `--shops K`, `--redis-cluster`, `--defect NAME`.
pub(super) struct Overrides<'a> {
    pub faults: &'a FaultArgs,
    pub shops: Option<u32>,
    pub redis_cluster: bool,
    pub defect: Option<Defect>,
}

impl Overrides<'_> {
    /// Sets the flags on `s`: a flag given wins over the scenario's `[shop]` and `[[faults]]`
    /// (a fault replaces one of the same kind and time); `--redis-cluster` only ever turns
    /// the cluster on.
    pub fn apply(&self, s: &mut Scenario) {
        self.faults.apply(s);
        if let Some(k) = self.shops {
            s.shop.shops = k;
        }
        s.shop.redis_cluster |= self.redis_cluster;
        if let Some(d) = self.defect {
            s.shop.defect = Some(d);
        }
    }
}
