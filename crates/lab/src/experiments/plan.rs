//! An experiment's runs as data: a [`Plan`] maps typed keys to run specs, one runner
//! ([`super::RunCtx::run_plan`]) runs any plan on the job slots, and its [`Done`] answers
//! each key's result, so analysis finds a run by what it is, never by its position in a
//! job list.

use super::RunCtx;
use std::fmt::Debug;

/// Runs to make: each a key (what the run is, e.g. `(Mode::VTrim, 20 reads)`) and the spec
/// that runs it. Keys are unique.
#[derive(Debug, Clone)]
pub struct Plan<K, S> {
    jobs: Vec<(K, S)>,
}

impl<K, S> Default for Plan<K, S> {
    fn default() -> Self {
        Plan { jobs: Vec::new() }
    }
}

impl<K: PartialEq + Debug, S> Plan<K, S> {
    pub fn new() -> Self {
        Plan::default()
    }

    /// Adds the run `spec` under `key`.
    ///
    /// # Panics
    /// If `key` is planned already (a plan is built by code, not from input: a duplicate
    /// is a bug in the experiment).
    pub fn add(&mut self, key: K, spec: S) {
        assert!(
            !self.jobs.iter().any(|(k, _)| *k == key),
            "run {key:?} planned twice"
        );
        self.jobs.push((key, spec));
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}

/// A plan's results, by key.
#[derive(Debug, Clone)]
pub struct Done<K, R> {
    results: Vec<(K, R)>,
}

impl<K: PartialEq + Debug, R> Done<K, R> {
    /// The result of the run planned under `key`.
    ///
    /// # Panics
    /// If no run was planned under `key` (a bug in the experiment's analysis).
    pub fn get(&self, key: &K) -> &R {
        self.results
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, r)| r)
            .unwrap_or_else(|| panic!("no run {key:?} was planned"))
    }

    /// Every (key, result), in the order planned.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &R)> {
        self.results.iter().map(|(k, r)| (k, r))
    }
}

impl RunCtx {
    /// Runs every spec of `plan` with `f` on the job slots (all cores, as [`RunCtx::map`]);
    /// the results by key. The first error is returned.
    pub fn run_plan<K: Sync + Send + PartialEq + Debug, S: Sync, R: Send>(
        &self,
        plan: Plan<K, S>,
        f: impl Fn(&S) -> Result<R, crate::LabError> + Sync,
    ) -> Result<Done<K, R>, crate::LabError> {
        let (keys, specs): (Vec<K>, Vec<S>) = plan.jobs.into_iter().unzip();
        let results = self.map(&specs, f)?;
        Ok(Done {
            results: keys.into_iter().zip(results).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_found_by_key_whatever_the_order_of_the_plan() {
        let mut plan = Plan::new();
        for n in [3u64, 1, 2] {
            plan.add(("square", n), n);
        }
        let done = RunCtx::default().run_plan(plan, |&n| Ok(n * n)).unwrap();
        assert_eq!(*done.get(&("square", 2)), 4);
        assert_eq!(*done.get(&("square", 3)), 9);
        let order: Vec<u64> = done.iter().map(|(k, _)| k.1).collect();
        assert_eq!(order, vec![3, 1, 2]);
    }

    #[test]
    #[should_panic(expected = "planned twice")]
    fn a_key_is_planned_once() {
        let mut plan = Plan::new();
        plan.add(1, ());
        plan.add(1, ());
    }
}
