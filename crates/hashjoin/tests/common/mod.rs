//! Helpers of the join tests: the expected answer computed directly, encoded inputs, specs,
//! scratch directories.
#![allow(dead_code)]

use hashjoin::store::{FileId, OsStore};
use hashjoin::{Algorithm, Input, JoinResult, JoinSpec, Relation};
use std::collections::HashMap;
use workloads::tpch::{Layout, Record};

/// (rows, sum of l_extendedprice, sum of o_totalprice over joined rows), computed directly.
pub fn expected(orders: &[Record], lines: &[Record]) -> (u64, i64, i64) {
    // Per key: how many orders, and the sum of their prices.
    let mut by_key: HashMap<u64, (i64, i64)> = HashMap::new();
    for o in orders {
        let e = by_key.entry(o.key).or_default();
        e.0 += 1;
        e.1 += o.price_cents;
    }
    let mut out = (0, 0, 0);
    for l in lines {
        if let Some(&(n, sum)) = by_key.get(&l.key) {
            out.0 += n as u64;
            out.1 += l.price_cents * n;
            out.2 += sum;
        }
    }
    out
}

pub fn encode(rs: &[Record], layout: Layout) -> Vec<u8> {
    let rb = layout.record_bytes();
    let mut v = vec![0u8; rs.len() * rb];
    for (i, r) in rs.iter().enumerate() {
        r.encode(layout, &mut v[i * rb..(i + 1) * rb]);
    }
    v
}

pub fn spec(algorithm: Algorithm) -> JoinSpec {
    JoinSpec {
        algorithm,
        read_buffer_bytes: 64 << 10,
        write_buffer_bytes: 16 << 10,
        fallocate: false,
        partitions: None,
        cpu_ns_per_row: 0,
        concurrent_users: 1,
    }
}

pub fn inputs(
    o: FileId,
    l: FileId,
    orders: &[Record],
    lines: &[Record],
    layout: Layout,
    offset: u64,
) -> (Input, Input) {
    (
        Input {
            file: o,
            offset_bytes: offset,
            rows: orders.len() as u64,
            layout,
            relation: Relation::Orders,
        },
        Input {
            file: l,
            offset_bytes: offset,
            rows: lines.len() as u64,
            layout,
            relation: Relation::Lineitem,
        },
    )
}

pub fn check(r: &JoinResult, want: (u64, i64, i64)) {
    assert_eq!(
        (
            r.rows,
            r.sum_l_extendedprice_cents,
            r.sum_o_totalprice_cents
        ),
        want
    );
}

pub fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("flashlab-join-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The ORDERS and LINEITEM table files in `data` opened as the join's inputs.
pub fn table_inputs(
    store: &mut OsStore,
    data: &std::path::Path,
    orders_rows: u64,
    lineitem_rows: u64,
) -> (Input, Input) {
    table_inputs_of(store, data, Layout::Fixed128, orders_rows, lineitem_rows)
}

/// As [`table_inputs`], for tables of `layout`.
pub fn table_inputs_of(
    store: &mut OsStore,
    data: &std::path::Path,
    layout: Layout,
    orders_rows: u64,
    lineitem_rows: u64,
) -> (Input, Input) {
    let o = store.open_input_path(&data.join("orders.tbl")).unwrap();
    let l = store.open_input_path(&data.join("lineitem.tbl")).unwrap();
    let input = |file, rows, relation| Input {
        file,
        offset_bytes: 64,
        rows,
        layout,
        relation,
    };
    (
        input(o, orders_rows, Relation::Orders),
        input(l, lineitem_rows, Relation::Lineitem),
    )
}

pub fn spill_files_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("flashlab-spill-")
        })
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "tmp")
        })
        .count()
}

/// Skewed inputs: `hot_orders` orders and `hot_lines` lineitems on key 7 (prices 0, 1,
/// ...), beside one order (price 1) and four lineitems (price 2) for each of `normal` keys
/// from 100 on.
pub fn hot_key(hot_orders: i64, hot_lines: i64, normal: u64) -> (Vec<Record>, Vec<Record>) {
    let hot = |n: i64| {
        (0..n).map(|i| Record {
            key: 7,
            price_cents: i,
        })
    };
    let keys = 100..100 + normal;
    let orders = hot(hot_orders)
        .chain(keys.clone().map(|k| Record {
            key: k,
            price_cents: 1,
        }))
        .collect();
    let lines = hot(hot_lines)
        .chain(keys.flat_map(|k| {
            (0..4).map(move |_| Record {
                key: k,
                price_cents: 2,
            })
        }))
        .collect();
    (orders, lines)
}
