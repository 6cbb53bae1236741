//! Packed rows: a list of rows in one byte buffer, for state that keeps rows for a long
//! time.
//!
//! A regular join keeps every row of both its inputs (Flink's semantics without a state
//! TTL), and a row as a [`SqlRow`] costs a vector of 24-byte [`Datum`]s plus an allocation
//! per string: a Nexmark bid is about 300 bytes in five allocations. Packed, it is its
//! values' bytes, about 130, in a buffer it shares with the other rows of its key. Reading a
//! row back unpacks it into a fresh [`SqlRow`], which only a match does; a join side
//! ([`JoinSide`]) keeps the rows it unpacked that way for the next match.
//!
//! The format: a row is its value count then each value, a value a tag byte and its
//! payload (integers, decimals and timestamps as zigzag LEB128 varints, doubles as their 8
//! bytes, strings and nested rows length-prefixed). It is private to this module and never
//! leaves the process but in checkpoints, which restore onto the same version.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::types::{Datum, SqlRow};

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const INT: u8 = 3;
const DOUBLE: u8 = 4;
const DECIMAL: u8 = 5;
const TIMESTAMP: u8 = 6;
const STR: u8 = 7;
const ROW: u8 = 8;

/// Rows packed one after another into a byte buffer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PackedRows {
    bytes: Vec<u8>,
}

impl PackedRows {
    /// Appends `row`.
    pub fn push(&mut self, row: &[Datum]) {
        pack_row(row, &mut self.bytes);
    }

    /// Whether no row was pushed.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The rows, unpacked, in the order they were pushed.
    pub fn iter(&self) -> Unpack<'_> {
        Unpack { rest: &self.bytes }
    }
}

/// The rows one side of a regular join keeps for a key: packed as they arrive, unpacked
/// for good the first time a row of the other side meets them.
///
/// Rows that are met once are often met again (q9's and q4's auction meets every bid of
/// the auction), and a row kept unpacked is met by cloning its values, without allocating
/// its strings again; rows that are never met (most of a join's rows, in q7 and q20) stay
/// packed. Rows are met in the order they arrived.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JoinSide {
    /// Rows met before, the older ones. Boxed so that a side never met costs one word,
    /// not a `Vec`'s three: most sides of a join are never met.
    #[allow(clippy::box_collection)]
    met: Option<Box<Vec<SqlRow>>>,
    /// Rows not met yet, the newer ones.
    packed: PackedRows,
}

impl JoinSide {
    /// Keeps `row`.
    pub fn push(&mut self, row: &[Datum]) {
        self.packed.push(row);
    }

    /// All the rows, in the order they came, unpacked from now on.
    pub fn meet(&mut self) -> &[SqlRow] {
        if !self.packed.is_empty() {
            let met = self.met.get_or_insert_with(Default::default);
            met.extend(self.packed.iter());
            self.packed = PackedRows::default();
        }
        self.met.as_deref().map_or(&[], Vec::as_slice)
    }

    /// Keeps only the rows `keep` is true of, in their order.
    pub fn retain(&mut self, keep: impl Fn(&[Datum]) -> bool) {
        if let Some(met) = &mut self.met {
            met.retain(|r| keep(r));
            if met.is_empty() {
                self.met = None;
            }
        }
        if !self.packed.is_empty() {
            let mut kept = PackedRows::default();
            for row in self.packed.iter() {
                if keep(&row) {
                    kept.push(&row);
                }
            }
            self.packed = kept;
        }
    }

    /// Whether no row is kept.
    pub fn is_empty(&self) -> bool {
        self.met.is_none() && self.packed.is_empty()
    }
}

/// The rows of a [`PackedRows`], each unpacked as it is reached.
pub struct Unpack<'a> {
    rest: &'a [u8],
}

impl Iterator for Unpack<'_> {
    type Item = SqlRow;
    fn next(&mut self) -> Option<SqlRow> {
        if self.rest.is_empty() {
            return None;
        }
        let row = unpack_row(&mut self.rest);
        if row.is_none() {
            // Bytes this module did not write (a damaged checkpoint): nothing more is read.
            self.rest = &[];
        }
        row
    }
}

fn pack_row(row: &[Datum], out: &mut Vec<u8>) {
    put_varint(row.len() as u64, out);
    for d in row {
        match d {
            Datum::Null => out.push(NULL),
            Datum::Bool(false) => out.push(FALSE),
            Datum::Bool(true) => out.push(TRUE),
            Datum::Int(i) => put_int(INT, *i, out),
            Datum::Decimal(i) => put_int(DECIMAL, *i, out),
            Datum::Timestamp(i) => put_int(TIMESTAMP, *i, out),
            Datum::Double(f) => {
                out.push(DOUBLE);
                out.extend_from_slice(&f.to_bits().to_le_bytes());
            }
            Datum::Str(s) => {
                out.push(STR);
                put_varint(s.len() as u64, out);
                out.extend_from_slice(s.as_bytes());
            }
            Datum::Row(r) => {
                out.push(ROW);
                pack_row(r, out);
            }
        }
    }
}

fn put_int(tag: u8, i: i64, out: &mut Vec<u8>) {
    out.push(tag);
    put_varint(((i << 1) ^ (i >> 63)) as u64, out);
}

fn put_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn unpack_row(rest: &mut &[u8]) -> Option<SqlRow> {
    let n = usize::try_from(varint(rest)?).ok()?;
    // Every value takes a byte at least: a count past the bytes left is damage.
    if n > rest.len() {
        return None;
    }
    let mut row = Vec::with_capacity(n);
    for _ in 0..n {
        row.push(unpack_datum(rest)?);
    }
    Some(row)
}

fn unpack_datum(rest: &mut &[u8]) -> Option<Datum> {
    let (&tag, tail) = rest.split_first()?;
    *rest = tail;
    let int = |rest: &mut &[u8]| varint(rest).map(|v| ((v >> 1) as i64) ^ -((v & 1) as i64));
    Some(match tag {
        NULL => Datum::Null,
        FALSE => Datum::Bool(false),
        TRUE => Datum::Bool(true),
        INT => Datum::Int(int(rest)?),
        DECIMAL => Datum::Decimal(int(rest)?),
        TIMESTAMP => Datum::Timestamp(int(rest)?),
        DOUBLE => {
            let (bits, tail) = rest.split_first_chunk::<8>()?;
            *rest = tail;
            Datum::Double(f64::from_bits(u64::from_le_bytes(*bits)))
        }
        STR => {
            let len = usize::try_from(varint(rest)?).ok()?;
            if len > rest.len() {
                return None;
            }
            let (text, tail) = rest.split_at(len);
            *rest = tail;
            Datum::Str(Arc::from(std::str::from_utf8(text).ok()?))
        }
        ROW => Datum::Row(unpack_row(rest)?.into()),
        _ => return None,
    })
}

fn varint(rest: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, tail) = rest.split_first()?;
        *rest = tail;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of every kind of value, edge values included, nested rows too.
    fn rows(seed: &mut u64) -> Vec<SqlRow> {
        let mut next = || {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed
        };
        (0..300)
            .map(|_| {
                let n = next() % 9;
                (0..n)
                    .map(|_| {
                        let v = next();
                        match v % 11 {
                            0 => Datum::Null,
                            1 => Datum::Bool(v & 64 == 0),
                            2 => Datum::Int(
                                [0, -1, i64::MIN, i64::MAX, v as i64][(v >> 8) as usize % 5],
                            ),
                            3 => Datum::Decimal(v as i64 >> (v % 60)),
                            4 => Datum::Timestamp(v as i64 % 4_000_000_000_000),
                            5 => Datum::Double(f64::from_bits(v)),
                            6 => Datum::Double(
                                [0.0, -0.0, f64::INFINITY, 1.5][(v >> 8) as usize % 4],
                            ),
                            7 => {
                                Datum::str(["", "a", "é€😀", "channel-3451"][(v >> 8) as usize % 4])
                            }
                            8 => Datum::str(&"x".repeat((v >> 8) as usize % 300)),
                            9 => Datum::Row(
                                vec![Datum::Int(v as i64), Datum::Null, Datum::str("n")].into(),
                            ),
                            _ => Datum::Row(Vec::new().into()),
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// Bit for bit (a NaN's too): `Datum`'s `==` says NaN differs from itself.
    fn same(a: &[Datum], b: &[Datum]) -> bool {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| match (x, y) {
                (Datum::Double(x), Datum::Double(y)) => x.to_bits() == y.to_bits(),
                (Datum::Row(x), Datum::Row(y)) => same(x, y),
                (x, y) => x == y,
            })
    }

    #[test]
    fn rows_unpack_as_they_were_packed() {
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20 {
            let rows = rows(&mut seed);
            let mut packed = PackedRows::default();
            assert!(packed.is_empty());
            for row in &rows {
                packed.push(row);
            }
            let back: Vec<SqlRow> = packed.iter().collect();
            assert_eq!(back.len(), rows.len());
            for (a, b) in rows.iter().zip(&back) {
                assert!(same(a, b), "{a:?} came back as {b:?}");
            }
        }
    }

    #[test]
    fn a_join_side_meets_its_rows_in_order_packed_or_not() {
        let row = |i: i64| vec![Datum::Int(i), Datum::str(&format!("s{i}"))];
        let mut side = JoinSide::default();
        assert!(side.meet().is_empty());
        side.push(&row(1));
        side.push(&row(2));
        assert_eq!(side.meet(), [row(1), row(2)]);
        side.push(&row(3));
        assert_eq!(side.meet(), [row(1), row(2), row(3)]);
        assert_eq!(side.meet(), [row(1), row(2), row(3)]);
    }

    #[test]
    fn damaged_bytes_end_the_rows_without_a_panic() {
        let mut packed = PackedRows::default();
        packed.push(&[Datum::str("abc"), Datum::Int(7)]);
        packed.push(&[Datum::Int(8)]);
        let whole = packed.bytes.clone();
        for cut in 0..whole.len() {
            let damaged = PackedRows {
                bytes: whole[..cut].to_vec(),
            };
            assert!(damaged.iter().count() <= 2);
        }
        let bad = PackedRows { bytes: vec![1, 99] };
        assert_eq!(bad.iter().count(), 0);
    }
}
