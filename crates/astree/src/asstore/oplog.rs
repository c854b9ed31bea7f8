//! Logical commits: tree operations logged in slots at a commit instead of the nodes they
//! changed, and when a commit should write the nodes after all.

use super::*;

/// Appends one logged operation: kind (1 insert, 2 remove), key length u16, value length
/// u32, key, value.
pub(super) fn encode_op(out: &mut Vec<u8>, kind: u8, key: &[u8], value: &[u8]) {
    out.push(kind);
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

pub(super) fn decode_ops(mut b: &[u8]) -> Result<Vec<LoggedOp>, TreeError> {
    let bad = || TreeError::Corrupt {
        id: NONE,
        offset: 0,
        msg: "a committed operation record is cut short".into(),
    };
    let mut out = Vec::new();
    while !b.is_empty() {
        if b.len() < 7 {
            return Err(bad());
        }
        let kl = u16::from_le_bytes([b[1], b[2]]) as usize;
        let vl = u32::from_le_bytes(b[3..7].try_into().expect("4")) as usize;
        if b.len() < 7 + kl + vl {
            return Err(bad());
        }
        let key = b[7..7 + kl].to_vec();
        out.push(match b[0] {
            1 => LoggedOp::Insert(key, b[7 + kl..7 + kl + vl].to_vec()),
            2 => LoggedOp::Remove(key),
            k => {
                return Err(TreeError::Corrupt {
                    id: NONE,
                    offset: 0,
                    msg: format!("unknown operation kind {k} in a committed record"),
                })
            }
        });
        b = &b[7 + kl + vl..];
    }
    Ok(out)
}

impl<S: Segments> AsStore<S> {
    /// Logical commits: whether this commit should write the dirty nodes instead (they are
    /// fewer bytes than the operations — at equal bytes the operations go, since a node
    /// commit also brings the next checkpoint closer; packed records compare the whole
    /// blocks each would write —, a bulk change asked for it, the operation log since the
    /// last node-level commit would outgrow the write buffer, or cleaning is due, which
    /// needs one).
    pub(super) fn node_commit_due(&self) -> bool {
        let ops_bytes = self.ops_log_bytes();
        // Both writes are padded to whole blocks with packed records: compare what each
        // would write.
        let dirty_bytes = if self.layout.packed {
            self.buffer_bytes.next_multiple_of(BLOCK_BYTES)
        } else {
            self.buffer.len() as u64 * self.slot_bytes as u64
        };
        self.ops.is_empty() || ops_bytes > dirty_bytes || self.node_commit_forced_at(ops_bytes)
    }

    /// The log bytes the operations logged since the last commit would take.
    fn ops_log_bytes(&self) -> u64 {
        let room = (self.slot_bytes - HEADER - 4) as u64;
        if self.layout.packed {
            let records = (self.ops.len() as u64).div_ceil(room);
            (self.ops.len() as u64 + records * (HEADER as u64 + 4)).next_multiple_of(BLOCK_BYTES)
        } else {
            (self.ops.len() as u64).div_ceil(room) * self.slot_bytes as u64
        }
    }

    /// Logical commits: whether the next commit must write the nodes, whatever it costs (a
    /// bulk change asked for it, the operation log since the last node-level commit would
    /// outgrow the write buffer, or cleaning is due).
    pub(super) fn node_commit_forced_now(&self) -> bool {
        self.node_commit_forced_at(self.ops_log_bytes())
    }

    fn node_commit_forced_at(&self, ops_bytes: u64) -> bool {
        self.node_commit_required
            || self.ops_since_node_commit + ops_bytes
                > self.cfg.buffer_nodes as u64 * self.slot_bytes as u64
            || self.over_space_limit()
    }

    /// Appends the logged operations as records, the last one marked as a (logical)
    /// commit.
    pub(super) fn commit_ops(&mut self) -> Result<(), TreeError> {
        let room = self.slot_bytes - HEADER - 4;
        let ops = std::mem::take(&mut self.ops);
        let first_seq = self.seq;
        let mut b = self.batch();
        // A commit with nothing logged since the last one still writes a (empty) record of
        // operations: a bare commit record would stand for a node-level commit, and the
        // nodes may lack changes the tree defers.
        let chunks: Vec<&[u8]> = if ops.is_empty() {
            vec![&[]]
        } else {
            ops.chunks(room).collect()
        };
        for chunk in chunks {
            self.put(&mut b, KIND_OPS, NONE, 4 + chunk.len(), |p| {
                p[0..4].copy_from_slice(&(chunk.len() as u32).to_le_bytes());
                p[4..4 + chunk.len()].copy_from_slice(chunk);
            });
        }
        let last = self.finish(&mut b, true);
        if let Err(e) = self.append(&b) {
            self.seq = first_seq;
            self.ops = ops;
            return Err(e);
        }
        self.last_commit = last;
        self.ops_since_node_commit += b.out.len() as u64;
        Ok(())
    }
}
