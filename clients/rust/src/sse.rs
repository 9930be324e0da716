//! A small parser for `text/event-stream` (the WHATWG "server-sent events" format). It
//! owns the bytes between chunks: a line, a UTF-8 sequence or a CRLF pair may be split
//! across two network reads, so nothing is interpreted until its line is complete.

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field; "message" when the server sent none.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The last `id:` seen on the stream so far (ids carry over, as the format says).
    pub id: Option<String>,
}

#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    /// The previous byte was a CR: a LF right after it ends no second line.
    after_cr: bool,
    started: bool,
    event: String,
    data: String,
    has_data: bool,
    last_id: Option<String>,
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// The last event id seen, to resume from with `Last-Event-ID`.
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// Feeds the next bytes of the stream; returns the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for &byte in bytes {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.end_line(&line) {
                        events.push(event);
                    }
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(byte);
                }
            }
        }
        events
    }

    fn end_line(&mut self, raw: &[u8]) -> Option<SseEvent> {
        let mut text = String::from_utf8_lossy(raw).into_owned();
        if !self.started {
            self.started = true;
            if let Some(rest) = text.strip_prefix('\u{feff}') {
                text = rest.to_owned();
            }
        }
        if text.is_empty() {
            return self.dispatch();
        }
        if text.starts_with(':') {
            return None; // a comment, such as a heartbeat
        }
        let (field, value) = match text.find(':') {
            Some(at) => {
                let value = &text[at + 1..];
                (&text[..at], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (text.as_str(), ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.last_id = Some(value.to_owned()),
            _ => {} // `retry` and unknown fields: nothing for us to do
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent {
            event: if event.is_empty() {
                "message".into()
            } else {
                event
            },
            data,
            id: self.last_id.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        chunks.iter().flat_map(|c| parser.feed(c)).collect()
    }

    #[test]
    fn events_with_ids_types_and_comments() {
        let events = all(&[b": heartbeat\n\nevent: acquired\nid: 7\ndata: {\"a\":1}\n\n"]);
        assert_eq!(
            events,
            vec![SseEvent {
                event: "acquired".into(),
                data: "{\"a\":1}".into(),
                id: Some("7".into())
            }]
        );
    }

    #[test]
    fn any_split_of_the_bytes_gives_the_same_events() {
        let stream = "\u{feff}event: x\r\nid: 1\r\ndata: h\u{e9}llo\r\ndata:two\r\n\r\nevent: y\rdata: z\r\r";
        let whole = all(&[stream.as_bytes()]);
        assert_eq!(whole.len(), 2);
        assert_eq!(whole[0].data, "h\u{e9}llo\ntwo");
        assert_eq!(whole[1].event, "y");
        assert_eq!(whole[1].id.as_deref(), Some("1"));
        let bytes = stream.as_bytes();
        for cut in 0..bytes.len() {
            assert_eq!(all(&[&bytes[..cut], &bytes[cut..]]), whole, "cut at {cut}");
        }
    }

    #[test]
    fn a_block_without_data_dispatches_nothing_and_an_unfinished_event_waits() {
        assert!(all(&[b"event: x\n\nid: 3\n\n"]).is_empty());
        let mut parser = SseParser::new();
        assert!(parser.feed(b"data: a\n").is_empty());
        assert_eq!(parser.feed(b"\n").len(), 1);
    }
}
