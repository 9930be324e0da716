//! The proxy's `Mode::StaleCopy`: a server whose copy of one znode contradicts the leader's.
//! On each connection that was open when the mode was set, the answer to the first `getData`
//! of the path is kept, and every later `getData` of it is answered with the kept data and
//! stat instead of the server's own. The server still answers each request (so xids, zxids
//! and the order of answers stay its own), and writes still reach it and are judged on the
//! real record: as far as the client can tell, its server holds a copy of that znode that
//! the leader does not. Connections made while the mode is set pass untouched, as on a
//! session that moved to another server.

use std::collections::HashSet;

use super::framing::{op, Message, Sieve};

/// What one connection asked and kept while its copy is stale.
#[derive(Default)]
pub struct Stale {
    /// The xids of the `getData` requests of the path not yet answered.
    asked: HashSet<i32>,
    /// The first answer's error code and body (after the reply header).
    kept: Option<([u8; 4], Vec<u8>)>,
}

/// Forwards `chunk` in whole messages: client→server (`up`), notes the `getData` requests
/// of `path`; server→client, answers them from the kept copy.
pub fn relay(sieve: &mut Sieve, chunk: &[u8], up: bool, path: &str, stale: &mut Stale) -> Vec<u8> {
    let mut out = Vec::new();
    for (message, bytes) in sieve.sieve(chunk, |_| true) {
        let Message::Request { xid, op } = message else {
            out.extend_from_slice(&bytes);
            continue;
        };
        if up {
            if op == op::GET_DATA && get_data_path(&bytes) == Some(path) {
                stale.asked.insert(xid);
            }
            out.extend_from_slice(&bytes);
        } else {
            out.extend_from_slice(&stale.answer(xid, bytes));
        }
    }
    out
}

impl Stale {
    /// A reply frame (length, xid, zxid, error, body); one to a noted request is kept the
    /// first time and replaced by the kept one after that.
    fn answer(&mut self, xid: i32, frame: Vec<u8>) -> Vec<u8> {
        const HEADER_END: usize = 4 + 4 + 8 + 4;
        if frame.len() < HEADER_END || !self.asked.remove(&xid) {
            return frame;
        }
        let error: [u8; 4] = frame[16..20].try_into().unwrap();
        let Some((kept_error, kept_body)) = &self.kept else {
            self.kept = Some((error, frame[HEADER_END..].to_vec()));
            return frame;
        };
        let length = (HEADER_END - 4 + kept_body.len()) as i32;
        let mut stale = length.to_be_bytes().to_vec();
        stale.extend_from_slice(&frame[4..16]);
        stale.extend_from_slice(kept_error);
        stale.extend_from_slice(kept_body);
        stale
    }
}

/// The path of a whole `getData` request frame (length, xid, type, path, watch).
fn get_data_path(frame: &[u8]) -> Option<&str> {
    let length = i32::from_be_bytes(frame.get(12..16)?.try_into().ok()?);
    let path = frame.get(16..16 + usize::try_from(length).ok()?)?;
    std::str::from_utf8(path).ok()
}
