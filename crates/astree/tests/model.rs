//! Every store runs the same B+tree suite: random inserts, updates, deletes, lookups and
//! range scans against a `BTreeMap`, with the tree's structure checked, and the contents
//! checked again after reopening.

use astree::asstore::{AsConfig, AsStore};
use astree::bftl::BftlStore;
use astree::cache::LruCache;
use astree::inplace::InPlaceStore;
use astree::segments::MemSegments;
use astree::storage::MemStorage;
use astree::store::NodeStore;
use astree::BTree;
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
enum Op {
    Insert(u16, u8),
    Remove(u16),
    Get(u16),
    Range(u16, u16),
    Sync,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u16..600, any::<u8>()).prop_map(|(k, v)| Op::Insert(k, v)),
        3 => (0u16..600).prop_map(Op::Remove),
        2 => (0u16..600).prop_map(Op::Get),
        1 => (0u16..600, 0u16..100).prop_map(|(a, n)| Op::Range(a, a.saturating_add(n))),
        1 => Just(Op::Sync),
    ]
}

fn key(k: u16) -> Vec<u8> {
    format!("key-{k:05}").into_bytes()
}

fn value(k: u16, v: u8) -> Vec<u8> {
    vec![v; (k % 40) as usize + 1]
}

fn run<S: NodeStore>(
    mut tree: BTree<S>,
    ops: &[Op],
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) -> Result<BTree<S>, TestCaseError> {
    for o in ops {
        match *o {
            Op::Insert(k, v) => {
                let old = tree.insert(&key(k), &value(k, v)).unwrap();
                prop_assert_eq!(old, model.insert(key(k), value(k, v)));
            }
            Op::Remove(k) => {
                let old = tree.remove(&key(k)).unwrap();
                prop_assert_eq!(old, model.remove(&key(k)));
            }
            Op::Get(k) => prop_assert_eq!(tree.get(&key(k)).unwrap(), model.get(&key(k)).cloned()),
            Op::Range(a, b) => {
                let got = tree.range(&key(a), Some(&key(b))).unwrap();
                let want: Vec<(Vec<u8>, Vec<u8>)> = model
                    .range(key(a)..key(b))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                prop_assert_eq!(got, want);
            }
            Op::Sync => tree.sync().unwrap(),
        }
    }
    contents_match(&mut tree, model)?;
    Ok(tree)
}

/// The tree's structure is sound and its contents (deferred changes included) are the
/// model's; the nodes hold every entry when nothing is deferred.
fn contents_match<S: NodeStore>(
    tree: &mut BTree<S>,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> Result<(), TestCaseError> {
    let n = tree.check().map_err(TestCaseError::fail)?;
    if tree.deferred_bytes() == 0 {
        prop_assert_eq!(n, model.len() as u64);
    }
    let all = tree.range(&[], None).unwrap();
    prop_assert_eq!(
        all,
        model
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    );
    Ok(())
}

/// Syncs an AS tree, reopens a store from what is durable, and checks its structure and
/// contents against the model.
fn synced_and_reopened_match(
    mut tree: BTree<LruCache<AsStore<MemSegments>>>,
    cfg: AsConfig,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> Result<(), TestCaseError> {
    tree.sync().unwrap();
    let image = tree.into_store().into_inner().storage().durable_image();
    let mut again = BTree::new(
        AsStore::open_with(MemSegments::from_image(image), cfg).unwrap(),
        8,
    )
    .unwrap();
    // A reopened tree defers nothing: its nodes hold every entry.
    contents_match(&mut again, model)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn inplace_store_matches_btreemap(ops in prop::collection::vec(op(), 1..1500), cache in 0usize..20) {
        let mut model = BTreeMap::new();
        let store = LruCache::new(InPlaceStore::open(MemStorage::new(), 1024).unwrap(), cache);
        let tree = run(BTree::new(store, 8).unwrap(), &ops, &mut model)?;
        let mut tree = tree;
        tree.sync().unwrap();
        // Reopen from the synced bytes.
        let image = tree.into_store().into_inner().storage().crash(0, 0);
        let mut again = BTree::new(InPlaceStore::open(MemStorage::from_image(image), 1024).unwrap(), 8).unwrap();
        contents_match(&mut again, &model)?;
    }

    #[test]
    fn bftl_store_matches_btreemap(ops in prop::collection::vec(op(), 1..1500), sectors in 1usize..8, c in 1usize..5, cache in 0usize..20) {
        let mut model = BTreeMap::new();
        let store = LruCache::new(BftlStore::new(MemStorage::new(), 1024, sectors, c).unwrap(), cache);
        run(BTree::new(store, 8).unwrap(), &ops, &mut model)?;
    }

    #[test]
    fn as_store_matches_btreemap(ops in prop::collection::vec(op(), 1..1500), buffer in 1usize..12, cache in 0usize..20, logical in any::<bool>(), packed in prop::option::of(prop::sample::select(vec![64usize, 128, 512])), flush_fraction in prop::sample::select(vec![1.0f64, 0.5, 0.25]), defer in deferral()) {
        let mut model = BTreeMap::new();
        let cfg = AsConfig { segment_bytes: 16 * 1024, logical_commits: logical, packed_unit_bytes: packed, flush_fraction, ..AsConfig::new(1024, buffer) };
        let store = LruCache::new(AsStore::open_with(MemSegments::new(), cfg.clone()).unwrap(), cache);
        let mut tree = BTree::new(store, 8).unwrap();
        if logical {
            tree.defer_changes(defer).unwrap();
        }
        let tree = run(tree, &ops, &mut model)?;
        synced_and_reopened_match(tree, cfg, &model)?;
    }
}

/// A budget of deferred changes (logical commits only): none, a few changes, many.
fn deferral() -> impl Strategy<Value = usize> {
    prop::sample::select(vec![0usize, 400, 4_000, 40_000])
}

/// A batch of changes: (key, Some(value)) inserts, (key, None) removes.
fn batch() -> impl Strategy<Value = Vec<(u16, Option<u8>)>> {
    prop::collection::vec(
        prop_oneof![
            3 => (0u16..600, any::<u8>()).prop_map(|(k, v)| (k, Some(v))),
            1 => (0u16..600).prop_map(|k| (k, None)),
        ],
        0..400,
    )
}

/// Applies each batch to the tree and, one change after another, to the model; the
/// tree's structure and contents are checked after each.
fn run_batches<S: NodeStore>(
    mut tree: BTree<S>,
    first_inserts: &[(u16, u8)],
    batches: &[Vec<(u16, Option<u8>)>],
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) -> Result<BTree<S>, TestCaseError> {
    let first: Vec<(u16, Option<u8>)> = first_inserts.iter().map(|&(k, v)| (k, Some(v))).collect();
    for b in std::iter::once(&first).chain(batches) {
        let owned: Vec<(Vec<u8>, Option<Vec<u8>>)> = b
            .iter()
            .map(|&(k, v)| (key(k), v.map(|v| value(k, v))))
            .collect();
        let ops: Vec<astree::tree::BatchOp> = owned
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
        tree.apply_batch(&ops).unwrap();
        for (k, v) in owned {
            match v {
                Some(v) => model.insert(k, v),
                None => model.remove(&k),
            };
        }
        contents_match(&mut tree, model)?;
    }
    Ok(tree)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn batches_into_the_inplace_store_match_changes_one_by_one(
        first in prop::collection::vec((0u16..600, any::<u8>()), 0..700),
        batches in prop::collection::vec(batch(), 0..5),
        cache in 0usize..20,
    ) {
        let mut model = BTreeMap::new();
        let store = LruCache::new(InPlaceStore::open(MemStorage::new(), 1024).unwrap(), cache);
        run_batches(BTree::new(store, 8).unwrap(), &first, &batches, &mut model)?;
    }

    #[test]
    fn batches_into_the_as_store_match_changes_one_by_one_and_survive_reopening(
        first in prop::collection::vec((0u16..600, any::<u8>()), 0..700),
        batches in prop::collection::vec(batch(), 0..5),
        buffer in 1usize..12,
        cache in 0usize..20,
        logical in any::<bool>(),
        packed in prop::option::of(prop::sample::select(vec![64usize, 256])),
        defer in deferral(),
    ) {
        let mut model = BTreeMap::new();
        let cfg = AsConfig { segment_bytes: 16 * 1024, logical_commits: logical, packed_unit_bytes: packed, ..AsConfig::new(1024, buffer) };
        let inner = AsStore::open_with(MemSegments::new(), cfg.clone()).unwrap();
        // Odd sizes: a cache bounded in nodes (LRU); even: in bytes (second chance).
        let store = if cache % 2 == 1 { LruCache::new(inner, cache) } else { LruCache::with_bytes(inner, cache * 300) };
        let mut tree = BTree::new(store, 8).unwrap();
        if logical {
            tree.defer_changes(defer).unwrap();
        }
        let tree = run_batches(tree, &first, &batches, &mut model)?;
        synced_and_reopened_match(tree, cfg, &model)?;
    }
}

#[test]
fn a_batch_into_an_empty_tree_is_built_of_nodes_filled_as_postgres_fills_them() {
    // 1,000 entries at fanout 8, each 2 + 9 + 4 + 8 bytes (the node size does not bind):
    // leaves of 7 keys (90% of 8), internal nodes of 5 keys (70%), so 6 children.
    use astree::tree::{INTERNAL_FILL_PERCENT, LEAF_FILL_PERCENT};
    assert_eq!(
        (8 * LEAF_FILL_PERCENT / 100, 8 * INTERNAL_FILL_PERCENT / 100),
        (7, 5)
    );
    let store = InPlaceStore::open(MemStorage::new(), 1024).unwrap();
    let mut tree = BTree::new(store, 8).unwrap();
    let owned: Vec<(Vec<u8>, Vec<u8>)> =
        (0..1000u16).rev().map(|k| (key(k), vec![7u8; 8])).collect();
    let ops: Vec<astree::tree::BatchOp> = owned
        .iter()
        .map(|(k, v)| (k.as_slice(), Some(v.as_slice())))
        .collect();
    tree.apply_batch(&ops).unwrap();
    assert_eq!(tree.check().unwrap(), 1000);
    // 143 leaves (142 of 7, one of 6), then 24, 4 and 1 internal nodes.
    assert_eq!(tree.node_count().unwrap(), 143 + 24 + 4 + 1);
    // One by one in key order, every leaf splits in half: more nodes.
    let mut one_by_one =
        BTree::new(InPlaceStore::open(MemStorage::new(), 1024).unwrap(), 8).unwrap();
    for (k, v) in owned.iter().rev() {
        one_by_one.insert(k, v).unwrap();
    }
    assert!(one_by_one.node_count().unwrap() > 220);
}

#[test]
fn a_bulk_build_is_committed_as_nodes_and_later_logical_commits_replay_on_it() {
    // Logical commits: the build drops its operations and asks for a node-level commit;
    // changes made in the same transaction after it, and logical commits after that,
    // must come back after reopening from what is durable.
    let cfg = AsConfig {
        segment_bytes: 64 * 1024,
        logical_commits: true,
        ..AsConfig::new(1024, 64)
    };
    let mut tree = BTree::new(
        AsStore::open_with(MemSegments::new(), cfg.clone()).unwrap(),
        8,
    )
    .unwrap();
    let owned: Vec<(Vec<u8>, Vec<u8>)> = (0..500u16).map(|k| (key(k), value(k, 1))).collect();
    let ops: Vec<astree::tree::BatchOp> = owned
        .iter()
        .map(|(k, v)| (k.as_slice(), Some(v.as_slice())))
        .collect();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = owned.iter().cloned().collect();
    // Not committed yet: nothing survives.
    tree.apply_batch(&ops).unwrap();
    let image = tree.store().storage().durable_image();
    let mut again = BTree::new(
        AsStore::open_with(MemSegments::from_image(image), cfg.clone()).unwrap(),
        8,
    )
    .unwrap();
    assert_eq!(again.check().unwrap(), 0);
    // The same transaction goes on, then commits; then a logical commit of one change.
    tree.insert(&key(9000), b"after the build").unwrap();
    model.insert(key(9000), b"after the build".to_vec());
    tree.sync().unwrap();
    tree.insert(&key(9001), b"logical").unwrap();
    model.insert(key(9001), b"logical".to_vec());
    tree.remove(&key(3)).unwrap();
    model.remove(&key(3));
    tree.sync().unwrap();
    assert!(tree.store().stats().syncs >= 2);
    let image = tree.store().storage().durable_image();
    let mut again = BTree::new(
        AsStore::open_with(MemSegments::from_image(image), cfg).unwrap(),
        8,
    )
    .unwrap();
    assert_eq!(again.check().unwrap(), model.len() as u64);
    let all = again.range(&[], None).unwrap();
    assert_eq!(all, model.into_iter().collect::<Vec<_>>());
}
