//! Typed table rows: a row type declares its columns (headers, with their units) once and
//! how each value is written ([`Cell`]); a report [`Table`] is then a caption, a file stem
//! and rows of that type ([`Table::of`]). Adding a table is declaring a row type.

use crate::report::Table;
use std::fmt;

/// One value of a table, and how it is written.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Text(String),
    /// A whole number.
    Count(u64),
    /// A number with this many decimals.
    Fixed(f64, usize),
    /// A number with its sign and this many decimals (`+1.25`).
    Signed(f64, usize),
    /// No value ("—").
    Missing,
}

impl Cell {
    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }

    /// `v` with `decimals` decimals, or "—" without a value.
    pub fn opt(v: Option<f64>, decimals: usize) -> Cell {
        v.map_or(Cell::Missing, |v| Cell::Fixed(v, decimals))
    }

    /// Nanoseconds written as milliseconds with `decimals` decimals.
    pub fn ms(ns: u64, decimals: usize) -> Cell {
        Cell::Fixed(ns as f64 / 1e6, decimals)
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Text(s) => f.write_str(s),
            Cell::Count(n) => write!(f, "{n}"),
            Cell::Fixed(v, d) => write!(f, "{:.*}", d, v),
            Cell::Signed(v, d) => write!(f, "{:+.*}", d, v),
            Cell::Missing => f.write_str("—"),
        }
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Cell {
        Cell::Text(s.to_string())
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Cell {
        Cell::Text(s)
    }
}

/// A row of a table of one type.
pub trait Row {
    /// The column headers, in order, each with its unit where it has one.
    const COLUMNS: &'static [&'static str];
    /// This row's values, one per column.
    fn cells(&self) -> Vec<Cell>;
}

impl Table {
    /// A table of `rows`, its headers `R::COLUMNS`.
    ///
    /// # Panics
    /// If a row gives a number of cells other than its columns' (a bug in the row type).
    pub fn of<R: Row>(
        file_stem: &str,
        caption: impl Into<String>,
        rows: impl IntoIterator<Item = R>,
    ) -> Table {
        Table {
            file_stem: file_stem.into(),
            caption: caption.into(),
            headers: R::COLUMNS.iter().map(|h| h.to_string()).collect(),
            rows: rows
                .into_iter()
                .map(|r| {
                    let cells = r.cells();
                    assert_eq!(
                        cells.len(),
                        R::COLUMNS.len(),
                        "a row of table {file_stem} has {} cells for its columns {:?}",
                        cells.len(),
                        R::COLUMNS
                    );
                    cells.iter().map(Cell::to_string).collect()
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Delete {
        mode: &'static str,
        commands: u64,
        delete_ns: u64,
        paper: Option<f64>,
    }

    impl Row for Delete {
        const COLUMNS: &'static [&'static str] = &["mode", "commands", "delete ms", "paper"];
        fn cells(&self) -> Vec<Cell> {
            vec![
                self.mode.into(),
                Cell::Count(self.commands),
                Cell::ms(self.delete_ns, 3),
                Cell::opt(self.paper, 2),
            ]
        }
    }

    #[test]
    fn a_row_type_writes_its_headers_once_and_each_value_as_declared() {
        let t = Table::of(
            "delete",
            "Deleting a file",
            [
                Delete {
                    mode: "TRIM",
                    commands: 161,
                    delete_ns: 12_345_678,
                    paper: Some(1.0),
                },
                Delete {
                    mode: "fTrim_pre",
                    commands: 1,
                    delete_ns: 500,
                    paper: None,
                },
            ],
        );
        assert_eq!(t.headers, ["mode", "commands", "delete ms", "paper"]);
        assert_eq!(t.rows[0], ["TRIM", "161", "12.346", "1.00"]);
        assert_eq!(t.rows[1], ["fTrim_pre", "1", "0.001", "—"]);
    }
}
