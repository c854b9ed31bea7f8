//! TPC-H ORDERS and LINEITEM, generated in-process with `tpchgen`, in flashlab's binary
//! table format.
//!
//! The join of `flashlab join` needs per row only the order key and a price, so a record
//! holds `key` (the order key) and `price_cents` (`o_totalprice` or `l_extendedprice`, in
//! cents). Two layouts set the record's size on disk:
//! - [`Layout::Columns`]: the two columns, 16 bytes (key u64, price i64);
//! - [`Layout::Fixed128`]: paper 001's fixed 128-byte records: a 4-byte key, then padding
//!   (in which the price travels at bytes 4..12, so the same query can be checked).
//!
//! File format: a 64-byte header (magic `FLABTBL1`, table, layout, record bytes, rows,
//! scale factor, all little-endian), then the records back to back.

use std::fmt;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;
use std::str::FromStr;
use thiserror::Error;
use tpchgen::generators::{LineItemGenerator, OrderGenerator, PartGeneratorIterator};
use tpchgen::random::{RandomBoundedInt, RandomBoundedLong};

pub const MAGIC: &[u8; 8] = b"FLABTBL1";
pub const HEADER_BYTES: usize = 64;

#[derive(Debug, Error)]
pub enum TableError {
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{path}: {msg}")]
    Format { path: String, msg: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    Orders,
    Lineitem,
}

impl Table {
    pub fn name(self) -> &'static str {
        match self {
            Table::Orders => "orders",
            Table::Lineitem => "lineitem",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    Columns,
    Fixed128,
}

impl Layout {
    pub fn record_bytes(self) -> usize {
        match self {
            Layout::Columns => 16,
            Layout::Fixed128 => 128,
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layout::Columns => "columns",
            Layout::Fixed128 => "fixed128",
        })
    }
}

impl FromStr for Layout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "columns" => Ok(Layout::Columns),
            "fixed128" => Ok(Layout::Fixed128),
            _ => Err(format!(
                "unknown layout {s:?}: expected columns or fixed128"
            )),
        }
    }
}

/// One row as the join sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub key: u64,
    pub price_cents: i64,
}

impl Record {
    /// Writes the record into `out` (`layout.record_bytes()` long).
    #[inline]
    pub fn encode(&self, layout: Layout, out: &mut [u8]) {
        match layout {
            Layout::Columns => {
                out[0..8].copy_from_slice(&self.key.to_le_bytes());
                out[8..16].copy_from_slice(&self.price_cents.to_le_bytes());
            }
            Layout::Fixed128 => {
                debug_assert!(self.key <= u32::MAX as u64, "fixed128 keys are 4 bytes");
                out[0..4].copy_from_slice(&(self.key as u32).to_le_bytes());
                out[4..12].copy_from_slice(&self.price_cents.to_le_bytes());
                out[12..128].fill(0);
            }
        }
    }

    #[inline]
    pub fn decode(layout: Layout, b: &[u8]) -> Record {
        match layout {
            Layout::Columns => Record {
                key: u64::from_le_bytes(b[0..8].try_into().expect("8 bytes")),
                price_cents: i64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
            },
            Layout::Fixed128 => Record {
                key: u32::from_le_bytes(b[0..4].try_into().expect("4 bytes")) as u64,
                price_cents: i64::from_le_bytes(b[4..12].try_into().expect("8 bytes")),
            },
        }
    }
}

/// ORDERS' two join columns (the order key and `o_totalprice`), drawn from the random
/// streams tpchgen's order generator draws them from, without the rest of the row.
/// TPC-H's generator gives every column its own stream, reset to the next row's seed at
/// each row's end whatever was drawn in it (`row_finished`), so the columns left out
/// change nothing here: the keys and prices are tpchgen's, row for row (tested against
/// its whole generator). Generating whole rows (dates, customers, clerks, priorities,
/// comments out of a 300 MiB text pool) was most of an SF 1 join's first simulated
/// repetition.
struct OrderRows {
    index: i64,
    rows: i64,
    line_count: RandomBoundedInt,
    quantity: RandomBoundedInt,
    discount: RandomBoundedInt,
    tax: RandomBoundedInt,
    part_key: RandomBoundedLong,
}

impl Iterator for OrderRows {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        if self.index >= self.rows {
            return None;
        }
        self.index += 1;
        let key = OrderGenerator::make_order_key(self.index);
        // o_totalprice as tpchgen's OrderGeneratorIterator::make_order sums it.
        let mut total = 0i64;
        for _ in 0..self.line_count.next_value() {
            let quantity = self.quantity.next_value() as i64;
            let discount = self.discount.next_value() as i64;
            let tax = self.tax.next_value() as i64;
            let part_price =
                PartGeneratorIterator::calculate_part_price(self.part_key.next_value());
            let discounted = part_price * quantity * (100 - discount);
            total += ((discounted / 100) * (100 + tax)) / 100;
        }
        self.line_count.row_finished();
        self.quantity.row_finished();
        self.discount.row_finished();
        self.tax.row_finished();
        self.part_key.row_finished();
        Some(Record {
            key: key as u64,
            price_cents: total,
        })
    }
}

/// LINEITEM's two join columns (`l_orderkey`, `l_extendedprice`), as [`OrderRows`] draws
/// ORDERS': from tpchgen's line-count, quantity and part-key streams, in its order.
struct LineRows {
    /// Orders done.
    index: i64,
    rows: i64,
    /// The current order's lines less one, and the line it is at.
    lines_less_one: i32,
    line: i32,
    line_count: RandomBoundedInt,
    quantity: RandomBoundedInt,
    part_key: RandomBoundedLong,
}

impl Iterator for LineRows {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        if self.index >= self.rows {
            return None;
        }
        let key = OrderGenerator::make_order_key(self.index + 1);
        let quantity = self.quantity.next_value() as i64;
        let price =
            PartGeneratorIterator::calculate_part_price(self.part_key.next_value()) * quantity;
        self.line += 1;
        if self.line > self.lines_less_one {
            self.line_count.row_finished();
            self.quantity.row_finished();
            self.part_key.row_finished();
            self.index += 1;
            self.lines_less_one = self.line_count.next_value() - 1;
            self.line = 0;
        }
        Some(Record {
            key: key as u64,
            price_cents: price,
        })
    }
}

/// Rows of `table` at scale factor `sf`, as join records, in generation order: TPC-H's
/// rows as tpchgen generates them (its first of one part), only the two columns the join
/// reads.
pub fn rows(table: Table, sf: f64) -> Box<dyn Iterator<Item = Record> + Send> {
    let rows = OrderGenerator::calculate_row_count(sf, 1, 1);
    match table {
        Table::Orders => Box::new(OrderRows {
            index: 0,
            rows,
            line_count: OrderGenerator::create_line_count_random(),
            quantity: LineItemGenerator::create_quantity_random(),
            discount: LineItemGenerator::create_discount_random(),
            tax: LineItemGenerator::create_tax_random(),
            part_key: LineItemGenerator::create_part_key_random(sf),
        }),
        Table::Lineitem => {
            let mut line_count = OrderGenerator::create_line_count_random();
            let lines_less_one = line_count.next_value() - 1;
            Box::new(LineRows {
                index: 0,
                rows,
                lines_less_one,
                line: 0,
                line_count,
                quantity: LineItemGenerator::create_quantity_random(),
                part_key: LineItemGenerator::create_part_key_random(sf),
            })
        }
    }
}

/// The number of rows [`rows`] gives, without generating them: ORDERS has tpchgen's
/// row count for the scale factor; LINEITEM has, per order, the value of the order
/// generator's line-count stream (1 to 7), which is all tpchgen draws to decide how many
/// lines an order gets. Counting SF 30's 180 M lines this way takes well under a second,
/// where generating them took most of a minute.
pub fn row_count(table: Table, sf: f64) -> u64 {
    let orders = OrderGenerator::calculate_row_count(sf, 1, 1);
    match table {
        // tpchgen's count is negative below SF 0, where it generates no rows.
        Table::Orders => orders.max(0) as u64,
        Table::Lineitem => {
            let mut lines = OrderGenerator::create_line_count_random();
            (0..orders.max(0))
                .map(|_| {
                    let n = lines.next_value();
                    lines.row_finished();
                    n as u64
                })
                .sum()
        }
    }
}

/// The header of a table file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Header {
    pub table: Table,
    pub layout: Layout,
    pub rows: u64,
    pub sf: f64,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut h = [0u8; HEADER_BYTES];
        h[0..8].copy_from_slice(MAGIC);
        h[8] = match self.table {
            Table::Orders => 1,
            Table::Lineitem => 2,
        };
        h[9] = match self.layout {
            Layout::Columns => 1,
            Layout::Fixed128 => 2,
        };
        h[12..16].copy_from_slice(&(self.layout.record_bytes() as u32).to_le_bytes());
        h[16..24].copy_from_slice(&self.rows.to_le_bytes());
        h[24..32].copy_from_slice(&self.sf.to_le_bytes());
        h
    }

    pub fn decode(path: &str, h: &[u8]) -> Result<Header, TableError> {
        let bad = |msg: &str| TableError::Format {
            path: path.to_string(),
            msg: msg.to_string(),
        };
        if h.len() < HEADER_BYTES || &h[0..8] != MAGIC {
            return Err(bad("not a flashlab table file (bad magic)"));
        }
        let table = match h[8] {
            1 => Table::Orders,
            2 => Table::Lineitem,
            t => return Err(bad(&format!("unknown table code {t}"))),
        };
        let layout = match h[9] {
            1 => Layout::Columns,
            2 => Layout::Fixed128,
            l => return Err(bad(&format!("unknown layout code {l}"))),
        };
        let rb = u32::from_le_bytes(h[12..16].try_into().expect("4 bytes")) as usize;
        if rb != layout.record_bytes() {
            return Err(bad(&format!(
                "record size {rb} does not match layout {layout}"
            )));
        }
        Ok(Header {
            table,
            layout,
            rows: u64::from_le_bytes(h[16..24].try_into().expect("8 bytes")),
            sf: f64::from_le_bytes(h[24..32].try_into().expect("8 bytes")),
        })
    }
}

/// Generates `table` at `sf` into `path`; returns its header. The file is written under
/// a temporary name in the same directory and renamed into place when complete, so a
/// reader (another run sharing the directory) sees the old file or the whole new one,
/// never a truncated or half-written one.
pub fn write_table(
    path: &Path,
    table: Table,
    sf: f64,
    layout: Layout,
) -> Result<Header, TableError> {
    let p = path.display().to_string();
    let io = |source| TableError::Io {
        path: p.clone(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("table");
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io)?;
    let f = tmp.reopen().map_err(io)?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    w.write_all(&[0u8; HEADER_BYTES]).map_err(io)?;
    let rb = layout.record_bytes();
    let mut buf = vec![0u8; rb];
    let mut n = 0u64;
    for r in rows(table, sf) {
        r.encode(layout, &mut buf);
        w.write_all(&buf).map_err(io)?;
        n += 1;
    }
    let header = Header {
        table,
        layout,
        rows: n,
        sf,
    };
    let mut f = w.into_inner().map_err(|e| io(e.into_error()))?;
    use std::io::{Seek, SeekFrom};
    f.seek(SeekFrom::Start(0)).map_err(io)?;
    f.write_all(&header.encode()).map_err(io)?;
    f.sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io)?;
    Ok(header)
}

/// Reads a table file's header.
pub fn read_header(path: &Path) -> Result<Header, TableError> {
    let p = path.display().to_string();
    let mut f = std::fs::File::open(path).map_err(|source| TableError::Io {
        path: p.clone(),
        source,
    })?;
    let mut h = [0u8; HEADER_BYTES];
    f.read_exact(&mut h).map_err(|source| TableError::Io {
        path: p.clone(),
        source,
    })?;
    let header = Header::decode(&p, &h)?;
    let len = f
        .metadata()
        .map_err(|source| TableError::Io {
            path: p.clone(),
            source,
        })?
        .len();
    let expect = HEADER_BYTES as u64 + header.rows * header.layout.record_bytes() as u64;
    if len != expect {
        return Err(TableError::Format {
            path: p,
            msg: format!("file is {len} bytes, the header promises {expect}"),
        });
    }
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_in_both_layouts() {
        let r = Record {
            key: 600_000,
            price_cents: 17366547,
        };
        for layout in [Layout::Columns, Layout::Fixed128] {
            let mut b = vec![0u8; layout.record_bytes()];
            r.encode(layout, &mut b);
            assert_eq!(Record::decode(layout, &b), r);
        }
    }

    #[test]
    fn the_join_columns_are_tpchgens_row_for_row() {
        for sf in [0.001, 0.01, 0.05, 0.2] {
            let orders: Vec<Record> = OrderGenerator::new(sf, 1, 1)
                .iter()
                .map(|o| Record {
                    key: o.o_orderkey as u64,
                    price_cents: o.o_totalprice.0,
                })
                .collect();
            assert!(
                rows(Table::Orders, sf).eq(orders.iter().copied()),
                "orders at SF {sf}"
            );
            let lines: Vec<Record> = LineItemGenerator::new(sf, 1, 1)
                .iter()
                .map(|l| Record {
                    key: l.l_orderkey as u64,
                    price_cents: l.l_extendedprice.0,
                })
                .collect();
            assert!(
                rows(Table::Lineitem, sf).eq(lines.iter().copied()),
                "lineitem at SF {sf}"
            );
        }
    }

    #[test]
    fn row_count_is_the_generated_count_without_generating() {
        for sf in [-1.0, -0.001, 0.0, 0.001, 0.01, 0.05, 0.2] {
            for table in [Table::Orders, Table::Lineitem] {
                assert_eq!(
                    row_count(table, sf),
                    rows(table, sf).count() as u64,
                    "{table:?} at SF {sf}"
                );
            }
        }
    }

    #[test]
    fn generates_tpch_rows() {
        assert_eq!(rows(Table::Orders, 0.001).count(), 1500);
        // TPC-H's first order at SF 1 (as dbgen): key 1, total price 173665.47.
        assert_eq!(
            rows(Table::Orders, 1.0).next(),
            Some(Record {
                key: 1,
                price_cents: 17366547
            })
        );
        let lines = rows(Table::Lineitem, 0.001).count();
        assert!((5900..6100).contains(&lines), "{lines}");
    }

    #[test]
    fn table_files_round_trip_and_reject_garbage() {
        let dir = std::env::temp_dir().join(format!("flashlab-tpch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("orders.tbl");
        let h = write_table(&p, Table::Orders, 0.001, Layout::Fixed128).unwrap();
        assert_eq!(read_header(&p).unwrap(), h);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 64 + 1500 * 128);
        // A reader of the old file keeps reading a whole file while a new one replaces it
        // (writing in place truncated it under the reader: a join then saw half a table).
        let mut old = std::fs::File::open(&p).unwrap();
        write_table(&p, Table::Orders, 0.002, Layout::Fixed128).unwrap();
        let mut bytes = Vec::new();
        old.read_to_end(&mut bytes).unwrap();
        assert_eq!(bytes.len(), 64 + 1500 * 128);
        assert_eq!(read_header(&p).unwrap().rows, 3000);
        let leftovers = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name() != "orders.tbl")
            .count();
        assert_eq!(leftovers, 0, "no temporary file is left");
        std::fs::write(&p, b"garbage").unwrap();
        assert!(read_header(&p)
            .unwrap_err()
            .to_string()
            .contains("orders.tbl"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
