//! The JSON DOM the rapidjson-compatible parser (module `json`) builds: [`Value`] and its
//! [`Array`]. Tensor `data` arrays hold hundreds of thousands of numbers, so
//! an array whose elements are all integer literals, or all literals with a
//! fraction or exponent, keeps them unboxed: 8 bytes per element instead of
//! a 32-byte `Value`, 4× less to grow, copy and free, and the tensor encoder
//! reads them as a slice. Any other element turns the array into plain
//! `Value`s (once). The choice is invisible: elements come back as the
//! `Value`s the parser read (`Uint` for a non-negative integer, `Int` for a
//! negative one, `Double`).
//!
//! An array whose elements a sink took while the parser read them (module
//! `json`, "Sinks") holds, instead of elements, the bytes the sink made of
//! them ([`Array::sink_bytes`]): what they mean is the sink's business.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;

/// A parsed JSON value (rapidjson DOM equivalent).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// Non-negative integer literal that fits u64 (rapidjson: IsUint64; also IsInt64
    /// when <= i64::MAX). `-0` is `Uint(0)`.
    Uint(u64),
    /// Negative integer literal that fits i64.
    Int(i64),
    /// Any literal with '.', exponent, NaN/Infinity, or an integer too large for u64/i64.
    Double(f64),
    /// Unescaped raw bytes (no UTF-8 validation; \uXXXX incl. surrogate pairs -> UTF-8).
    String(Vec<u8>),
    /// Array elements in document order (numbers stored compactly, see [`Array`]).
    Array(Array),
    /// Members in document order; duplicates kept.
    Object(Vec<(Vec<u8>, Value)>),
}

impl Value {
    /// First member named `key`; `None` if absent or if `self` is not an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members
                .iter()
                .find(|(k, _)| k.as_slice() == key.as_bytes())
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// rapidjson `GetUint64` guarded by `IsUint64`.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Uint(u) => Some(*u),
            _ => None,
        }
    }

    /// rapidjson `GetInt64` guarded by `IsInt64`: `Uint` up to `i64::MAX`, or `Int`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Uint(u) => i64::try_from(*u).ok(),
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// rapidjson `GetDouble` guarded by `IsNumber` (integers converted with rounding to
    /// nearest, as the C++ casts do).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Uint(u) => Some(*u as f64),
            Value::Int(i) => Some(*i as f64),
            Value::Double(d) => Some(*d),
            _ => None,
        }
    }

    /// The number, as the parser read it; `None` if `self` is not a number.
    pub(crate) fn as_number(&self) -> Option<Number> {
        match *self {
            Value::Uint(u) => Some(Number::Uint(u)),
            Value::Int(i) => Some(Number::Int(i)),
            Value::Double(d) => Some(Number::Double(d)),
            _ => None,
        }
    }

    /// rapidjson `GetBool` guarded by `IsBool`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The raw (unescaped) bytes of a string.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The elements of an array.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The members of an object, in document order.
    pub fn as_object(&self) -> Option<&[(Vec<u8>, Value)]> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// Short type name for diagnostics.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Uint(_) => "uint",
            Value::Int(_) => "int",
            Value::Double(_) => "double",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }
}

/// A JSON array, elements in document order.
#[derive(Clone, Default)]
pub struct Array(Items);

#[derive(Clone)]
enum Items {
    Values(Vec<Value>),
    /// `Uint`s up to `i64::MAX` and `Int`s (negative by construction).
    Integers(Vec<i64>),
    Doubles(Vec<f64>),
    /// What a sink made of the elements (no element is kept).
    Sunk(Bytes),
}

impl Default for Items {
    fn default() -> Self {
        Items::Values(Vec::new())
    }
}

/// A number as the parser read it (a [`Value`] number without the 32-byte
/// envelope).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Number {
    Uint(u64),
    Int(i64),
    Double(f64),
}

impl From<Number> for Value {
    fn from(n: Number) -> Value {
        match n {
            Number::Uint(u) => Value::Uint(u),
            Number::Int(i) => Value::Int(i),
            Number::Double(d) => Value::Double(d),
        }
    }
}

/// The elements of an all-number array, borrowed (see [`Array::numbers`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Numbers<'a> {
    /// Integer literals (`Uint` when non-negative, else `Int`).
    Integers(&'a [i64]),
    /// Literals with a fraction, an exponent, NaN or infinity.
    Doubles(&'a [f64]),
}

impl Array {
    /// The elements kept (none for an array a sink took).
    pub fn len(&self) -> usize {
        match &self.0 {
            Items::Values(v) => v.len(),
            Items::Integers(v) => v.len(),
            Items::Doubles(v) => v.len(),
            Items::Sunk(_) => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements; numbers of a compact array are made on the fly (no allocation).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Cow<'_, Value>> + '_ {
        let (values, integers, doubles): (&[Value], &[i64], &[f64]) = match &self.0 {
            Items::Values(v) => (v, &[], &[]),
            Items::Integers(v) => (&[], v, &[]),
            Items::Doubles(v) => (&[], &[], v),
            Items::Sunk(_) => (&[], &[], &[]),
        };
        let owned = integers
            .iter()
            .map(|&i| integer(i))
            .chain(doubles.iter().map(|&d| Value::Double(d)));
        Elements {
            values: values.iter(),
            owned,
        }
    }

    /// The elements when the array keeps them as `Value`s (numbers-only arrays have
    /// nothing to change in place).
    pub fn values_mut(&mut self) -> Option<&mut [Value]> {
        match &mut self.0 {
            Items::Values(v) => Some(v),
            _ => None,
        }
    }

    /// The elements as a slice of numbers, when all are numbers of one kind.
    pub(crate) fn numbers(&self) -> Option<Numbers<'_>> {
        match &self.0 {
            Items::Values(_) | Items::Sunk(_) => None,
            Items::Integers(v) => Some(Numbers::Integers(v)),
            Items::Doubles(v) => Some(Numbers::Doubles(v)),
        }
    }

    /// The array a sink took, holding the bytes it made of the elements.
    pub(crate) fn from_sink(bytes: Bytes) -> Array {
        Array(Items::Sunk(bytes))
    }

    /// The bytes a sink made of this array's elements, if one took them.
    pub(crate) fn sink_bytes(&self) -> Option<&Bytes> {
        match &self.0 {
            Items::Sunk(bytes) => Some(bytes),
            _ => None,
        }
    }

    /// Appends a number, keeping the compact form while the elements allow it.
    #[inline(always)]
    pub(crate) fn push_number(&mut self, n: Number) {
        match &mut self.0 {
            Items::Doubles(d) => {
                if let Number::Double(x) = n {
                    d.push(x);
                    return;
                }
            }
            Items::Integers(v) => match n {
                Number::Int(i) => {
                    v.push(i);
                    return;
                }
                Number::Uint(u) if u <= i64::MAX as u64 => {
                    v.push(u as i64);
                    return;
                }
                _ => {}
            },
            Items::Values(_) | Items::Sunk(_) => {}
        }
        self.push_first_or_other(n);
    }

    /// Appends `v` (a number stays compact where it can).
    pub(crate) fn push(&mut self, v: Value) {
        match v.as_number() {
            Some(n) => self.push_number(n),
            None => self.push_value(v),
        }
    }

    /// The first element decides the compact kind; a number of another kind
    /// ends the compact form.
    #[cold]
    fn push_first_or_other(&mut self, n: Number) {
        if self.is_empty() {
            let first = match n {
                Number::Double(x) => Some(Items::Doubles(vec![x])),
                Number::Int(i) => Some(Items::Integers(vec![i])),
                Number::Uint(u) if u <= i64::MAX as u64 => Some(Items::Integers(vec![u as i64])),
                Number::Uint(_) => None,
            };
            if let Some(items) = first {
                self.0 = items;
                return;
            }
        }
        self.push_value(n.into());
    }

    /// Appends a `Value`, turning a compact array into values first.
    fn push_value(&mut self, v: Value) {
        if let Items::Values(values) = &mut self.0 {
            values.push(v);
            return;
        }
        let mut values: Vec<Value> = self.iter().map(Cow::into_owned).collect();
        values.push(v);
        self.0 = Items::Values(values);
    }
}

fn integer(i: i64) -> Value {
    if i < 0 {
        Value::Int(i)
    } else {
        Value::Uint(i as u64)
    }
}

/// [`Array::iter`]'s iterator: borrowed `Value`s or numbers made on the fly.
/// Only one of the two is non-empty.
struct Elements<'a, I> {
    values: std::slice::Iter<'a, Value>,
    owned: I,
}

impl<'a, I: Iterator<Item = Value>> Iterator for Elements<'a, I> {
    type Item = Cow<'a, Value>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.values.next() {
            Some(v) => Some(Cow::Borrowed(v)),
            None => self.owned.next().map(Cow::Owned),
        }
    }

    /// Exact: `owned` maps slices.
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.values.len() + self.owned.size_hint().0;
        (n, Some(n))
    }
}

impl<'a, I: Iterator<Item = Value>> ExactSizeIterator for Elements<'a, I> {}

impl<'a> IntoIterator for &'a Array {
    type Item = Cow<'a, Value>;
    type IntoIter = Box<dyn ExactSizeIterator<Item = Cow<'a, Value>> + 'a>;

    /// For `for` loops over small arrays (objects, shapes); hot loops use [`Array::iter`].
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl From<Vec<Value>> for Array {
    /// Plain `Value`s as given (no compaction: equality does not depend on it).
    fn from(values: Vec<Value>) -> Self {
        Array(Items::Values(values))
    }
}

impl PartialEq for Array {
    fn eq(&self, other: &Self) -> bool {
        self.sink_bytes() == other.sink_bytes()
            && self.len() == other.len()
            && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.sink_bytes() {
            Some(bytes) => write!(f, "<{} bytes from a sink>", bytes.len()),
            None => f.debug_list().entries(self.iter()).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(values: &[Value]) -> Array {
        let mut a = Array::default();
        for v in values {
            a.push(v.clone());
        }
        a
    }

    #[test]
    fn numbers_of_one_kind_stay_compact_and_read_back_unchanged() {
        let ints = [Value::Uint(3), Value::Int(-4), Value::Uint(0)];
        let a = array(&ints);
        assert!(matches!(a.numbers(), Some(Numbers::Integers([3, -4, 0]))));
        assert_eq!(a.iter().map(Cow::into_owned).collect::<Vec<_>>(), ints);
        let doubles = [Value::Double(1.5), Value::Double(-0.0)];
        let a = array(&doubles);
        assert!(matches!(a.numbers(), Some(Numbers::Doubles(_))));
        assert_eq!(a, Array::from(doubles.to_vec()));
        assert_eq!(format!("{a:?}"), format!("{:?}", doubles.to_vec()));
    }

    #[test]
    fn any_other_element_turns_the_array_into_values_in_order() {
        for mixed in [
            vec![Value::Uint(1), Value::Double(2.0)],
            vec![Value::Double(2.0), Value::Uint(1)],
            vec![Value::Uint(1), Value::Uint(u64::MAX)],
            vec![Value::Uint(u64::MAX), Value::Uint(1)],
            vec![Value::Int(-1), Value::Null, Value::Int(-2)],
            vec![Value::Bool(true), Value::Uint(1)],
        ] {
            let a = array(&mixed);
            assert!(a.numbers().is_none(), "{mixed:?}");
            assert_eq!(a.iter().map(Cow::into_owned).collect::<Vec<_>>(), mixed);
            assert_eq!(a.iter().len(), mixed.len());
        }
        assert!(Array::default().is_empty());
        assert!(array(&[]).numbers().is_none());
    }
}
