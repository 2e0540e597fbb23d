//! A protocol buffer text format reader (what LUCI's `vms.cfg` is written in), to a tree of
//! named fields with their lines; what the fields mean is the caller's business.
//!
//! Grammar: a message is a list of fields, each `name: value` or `name { … }` (the colon is
//! optional before a message, and `< … >` delimits a message as `{ … }` does); a field may be
//! followed by `,` or `;`. A value is a string (`"…"` or `'…'` with C escapes; adjacent strings
//! concatenate), a number, an identifier (an enum value, `true`, `false`), a message, or a list
//! `[v, …]` (the field repeated once per item). `#` comments to the end of the line. Nesting is
//! bounded by [`MAX_NESTING`](super::MAX_NESTING), so no input can exhaust the stack, and no error
//! quotes the text it is about.

use std::ops::Range;

use super::spec::MAX_NESTING;

/// A syntax error: the line (from 1) and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct SyntaxError {
    /// The line.
    pub line: u32,
    /// What is wrong, without the text itself.
    pub what: String,
}

/// A value as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A string, escapes resolved and adjacent parts joined.
    Str(String),
    /// A number, as written (`-` sign included).
    Num(String),
    /// An identifier: an enum value, `true` or `false`.
    Ident(String),
    /// A message.
    Msg(Vec<Field>),
}

/// One field as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// The line its name is on.
    pub line: u32,
    /// Its value.
    pub value: Value,
    /// Where it is in the text, name to the end of its value (bytes).
    pub span: Range<usize>,
}

/// Parses a whole text as one message: its top-level fields.
pub fn parse(text: &str) -> Result<Vec<Field>, SyntaxError> {
    let mut p = Parser { b: text.as_bytes(), text, at: 0, line: 1 };
    let fields = p.message(None, 0)?;
    Ok(fields)
}

struct Parser<'a> {
    b: &'a [u8],
    text: &'a str,
    at: usize,
    line: u32,
}

impl Parser<'_> {
    fn fail<T>(&self, what: impl Into<String>) -> Result<T, SyntaxError> {
        Err(SyntaxError { line: self.line, what: what.into() })
    }

    /// Skips white space and comments; the next byte, if any.
    fn peek(&mut self) -> Option<u8> {
        while let Some(&c) = self.b.get(self.at) {
            match c {
                b'\n' => {
                    self.line += 1;
                    self.at += 1;
                }
                b' ' | b'\t' | b'\r' | 0x0b | 0x0c => self.at += 1,
                b'#' => {
                    while self.b.get(self.at).is_some_and(|&c| c != b'\n') {
                        self.at += 1;
                    }
                }
                _ => return Some(c),
            }
        }
        None
    }

    fn eat(&mut self, c: u8) -> bool {
        let hit = self.peek() == Some(c);
        if hit {
            self.at += 1;
        }
        hit
    }

    /// Fields up to `close` (`}` or `>`), or to the end of the text when `None`.
    fn message(&mut self, close: Option<u8>, depth: usize) -> Result<Vec<Field>, SyntaxError> {
        if depth > MAX_NESTING {
            return self.fail(format!("messages nest deeper than {MAX_NESTING} levels"));
        }
        let mut fields = Vec::new();
        loop {
            match (self.peek(), close) {
                (None, None) => return Ok(fields),
                (None, Some(c)) => {
                    return self.fail(format!("the text ends before the closing {}", c as char));
                }
                (Some(c), Some(want)) if c == want => {
                    self.at += 1;
                    return Ok(fields);
                }
                (Some(b'}' | b'>'), _) => return self.fail("a closing bracket that closes nothing"),
                _ => {}
            }
            self.field(depth, &mut fields)?;
            if !self.eat(b',') {
                self.eat(b';');
            }
        }
    }

    /// One field (a list value adds one per item).
    fn field(&mut self, depth: usize, out: &mut Vec<Field>) -> Result<(), SyntaxError> {
        let (start, line) = (self.at, self.line);
        if self.peek() == Some(b'[') {
            return self.fail("extension fields ([name]) are not part of this schema");
        }
        let name = self.ident().ok_or_else(|| SyntaxError { line, what: "expected a field name".into() })?;
        let colon = self.eat(b':');
        let mut push = |p: &mut Self, value: Value| {
            out.push(Field { name: name.clone(), line, value, span: start..p.at });
        };
        match self.peek() {
            Some(b'{' | b'<') => {
                let value = self.msg_value(depth)?;
                push(self, value);
            }
            Some(b'[') if colon => {
                self.at += 1;
                if self.eat(b']') {
                    return Ok(());
                }
                loop {
                    let value = match self.peek() {
                        Some(b'{' | b'<') => self.msg_value(depth)?,
                        _ => self.scalar()?,
                    };
                    push(self, value);
                    if self.eat(b']') {
                        return Ok(());
                    }
                    if !self.eat(b',') {
                        return self.fail("expected , or ] in a list");
                    }
                }
            }
            _ if colon => {
                let value = self.scalar()?;
                push(self, value);
            }
            _ => return self.fail(format!("expected : or {{ after the field name {name}")),
        }
        Ok(())
    }

    fn msg_value(&mut self, depth: usize) -> Result<Value, SyntaxError> {
        let close = if self.b[self.at] == b'{' { b'}' } else { b'>' };
        self.at += 1;
        Ok(Value::Msg(self.message(Some(close), depth + 1)?))
    }

    /// `[A-Za-z_][A-Za-z0-9_]*`, or `None` (nothing consumed).
    fn ident(&mut self) -> Option<String> {
        self.peek();
        let start = self.at;
        if !self.b.get(start).is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_') {
            return None;
        }
        while self.b.get(self.at).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') {
            self.at += 1;
        }
        Some(self.text[start..self.at].to_owned())
    }

    fn scalar(&mut self) -> Result<Value, SyntaxError> {
        match self.peek() {
            Some(b'"' | b'\'') => {
                let mut bytes = Vec::new();
                while matches!(self.peek(), Some(b'"' | b'\'')) {
                    self.string(&mut bytes)?;
                }
                match String::from_utf8(bytes) {
                    Ok(s) => Ok(Value::Str(s)),
                    Err(_) => self.fail("a string that is not UTF-8"),
                }
            }
            Some(c) if c.is_ascii_digit() || c == b'-' || c == b'+' || c == b'.' => {
                let start = self.at;
                self.at += 1;
                while self.b.get(self.at).is_some_and(|c| c.is_ascii_alphanumeric() || b"._+-".contains(c)) {
                    self.at += 1;
                }
                Ok(Value::Num(self.text[start..self.at].to_owned()))
            }
            _ => match self.ident() {
                Some(id) => Ok(Value::Ident(id)),
                None => self.fail("expected a value (a string, a number, a name or a message)"),
            },
        }
    }

    /// One quoted string, appended to `out` with its escapes resolved.
    fn string(&mut self, out: &mut Vec<u8>) -> Result<(), SyntaxError> {
        let quote = self.b[self.at];
        self.at += 1;
        loop {
            let Some(&c) = self.b.get(self.at) else { return self.fail("a string is not closed") };
            self.at += 1;
            match c {
                b'\n' => return self.fail("a string is not closed on its line"),
                c if c == quote => return Ok(()),
                b'\\' => self.escape(out)?,
                c => out.push(c),
            }
        }
    }

    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), SyntaxError> {
        let Some(&c) = self.b.get(self.at) else { return self.fail("a string is not closed") };
        self.at += 1;
        let simple = match c {
            b'n' => Some(b'\n'),
            b't' => Some(b'\t'),
            b'r' => Some(b'\r'),
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'v' => Some(0x0b),
            b'\\' | b'\'' | b'"' | b'?' => Some(c),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            return Ok(());
        }
        let digits = |p: &mut Self, max: usize, radix: u32| {
            let start = p.at;
            while p.at - start < max && p.b.get(p.at).is_some_and(|c| (*c as char).is_digit(radix)) {
                p.at += 1;
            }
            u32::from_str_radix(&p.text[start..p.at], radix).ok()
        };
        match c {
            b'0'..=b'7' => {
                self.at -= 1;
                match digits(self, 3, 8) {
                    Some(n) if n <= 0xff => out.push(n as u8),
                    _ => return self.fail("an octal escape above \\377"),
                }
            }
            b'x' | b'X' => match digits(self, 2, 16) {
                Some(n) => out.push(n as u8),
                None => return self.fail("\\x needs hex digits"),
            },
            b'u' | b'U' => {
                let len = if c == b'u' { 4 } else { 8 };
                let start = self.at;
                let ch = digits(self, len, 16).filter(|_| self.at - start == len).and_then(char::from_u32);
                let Some(ch) = ch else {
                    return self.fail(format!("\\{} needs {len} hex digits of a character", c as char));
                };
                out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
            }
            _ => return self.fail("an unknown escape in a string"),
        }
        Ok(())
    }
}

/// Writes `s` as a double-quoted string (printable ASCII as is, the rest escaped).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (' '..='~').contains(&c) => out.push(c),
            c => {
                let mut buf = [0; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\{b:03o}"));
                }
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests;
