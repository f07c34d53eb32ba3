//! Lenient lists: a list of objects where any element may be something else (`null`, a
//! number, a string). Odd elements are kept as `None` so that the rest is still read, and
//! a value that is not a list at all is told apart from a list.

use std::marker::PhantomData;

use serde::de::{
    self, value::MapAccessDeserializer, DeserializeSeed, Deserializer, IgnoredAny,
    IntoDeserializer, MapAccess, SeqAccess, Visitor,
};
use serde::Deserialize;
use serde_json::value::RawValue;

/// A value that should be a list of `T` objects.
pub(crate) enum List<T> {
    Items(Vec<Option<T>>),
    NotAList,
}

/// One element: an object read as `T`, or `None` for anything else.
pub(crate) struct Lenient<T>(pub(crate) Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ListVisitor(PhantomData))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LenientVisitor(PhantomData))
    }
}

struct ListVisitor<T>(PhantomData<T>);
struct LenientVisitor<T>(PhantomData<T>);

/// The visits of scalars, which give `$value`.
macro_rules! scalars {
    ($value:expr) => {
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for ListVisitor<T> {
    type Value = List<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(16));
        while let Some(Lenient(item)) = seq.next_element::<Lenient<T>>()? {
            items.push(item);
        }
        Ok(List::Items(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        IgnoredAny::deserialize(MapAccessDeserializer::new(map))?;
        Ok(List::NotAList)
    }

    scalars!(List::NotAList);
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for LenientVisitor<T> {
    type Value = Lenient<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(|t| Lenient(Some(t)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Lenient(None))
    }

    scalars!(Lenient(None));
}

/// An object read as `T`, with the address of its first key's text when that key borrows
/// from the input: the object's opening brace is the first byte before the key's quote that
/// is not whitespace. Elements are read in place this way, so a reader learns where each
/// one starts without a second pass over the body.
pub(crate) struct Located<T> {
    pub(crate) value: T,
    /// Address of the first key's first character; `None` for an empty object or a key
    /// with escapes (decoded into a copy).
    pub(crate) key: Option<usize>,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Located<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(LocatedVisitor(PhantomData))
    }
}

struct LocatedVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for LocatedVisitor<T> {
    type Value = Located<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let first = map.next_key::<Key<'de>>()?;
        let key = match &first {
            Some(Key::Borrowed(k)) => Some(k.as_ptr() as usize),
            _ => None,
        };
        let value = T::deserialize(MapAccessDeserializer::new(Peeked { first, map }))?;
        Ok(Located { value, key })
    }
}

/// A key as the input holds it: borrowed when it has no escapes.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Key::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Key::Owned(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Key::Owned(v))
    }
}

/// A map whose first key was read already: `T` reads it as if it never had been.
struct Peeked<'de, A> {
    first: Option<Key<'de>>,
    map: A,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Peeked<'de, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        match self.first.take() {
            Some(Key::Borrowed(k)) => {
                let d = de::value::BorrowedStrDeserializer::<A::Error>::new(k);
                seed.deserialize(d).map(Some)
            }
            Some(Key::Owned(k)) => seed.deserialize(k.into_deserializer()).map(Some),
            None => self.map.next_key_seed(seed),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// Whether `body` is a JSON object: a body that is an array is read by serde as a struct
/// too, field by field, and no field of it is a top-level member.
pub(crate) fn is_object(body: &str) -> bool {
    let first = body.bytes().find(|b| !is_json_space(*b));
    first == Some(b'{')
}

/// The four bytes JSON (and serde_json) takes for whitespace.
pub(crate) fn is_json_space(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\t' | b'\r')
}

/// A top-level field that may be present with any value, `null` included: `Option` reads
/// `null` as absent, but a key given twice is an error whatever its values, so a reader that
/// resumes after the first must know it was there. Declared with `#[serde(default)]`.
#[derive(Default, Clone, Copy)]
pub(crate) struct Seen<'a>(pub(crate) Option<&'a RawValue>);

impl<'a> Seen<'a> {
    /// The value, unless absent or `null` (what `Option<&RawValue>` would give).
    pub(crate) fn value(self) -> Option<&'a RawValue> {
        self.0.filter(|raw| raw.get() != "null")
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Seen<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'a RawValue>::deserialize(d).map(|raw| Seen(Some(raw)))
    }
}
