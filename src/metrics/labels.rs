//! Label values as enums, and families whose series are made up front, one per value.
//!
//! Every label of lockwarden's metrics takes its values from a short, fixed list (never a
//! lock name, an owner or a path): each list is an enum here. A [`Labeled`] family holds the
//! series of every value from the start, so recording is an index into a vector and an
//! atomic add, with no hashing, no lock and no string built per call, and a scrape shows
//! every value (as 0 until it happens).

use std::marker::PhantomData;

use prometheus::core::{MetricVec, MetricVecBuilder};

/// The values one label takes.
pub trait LabelValue: Copy + 'static {
    /// Every value, in declaration order (`index` is the position here).
    const ALL: &'static [Self];
    fn label(self) -> &'static str;
    fn index(self) -> usize;
}

/// Declares an enum of label values: `Name { Variant = "value", ... }`.
macro_rules! label_values {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $value:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name { $($(#[$vdoc])* $variant),+ }

        impl $crate::metrics::labels::LabelValue for $name {
            const ALL: &'static [$name] = &[$($name::$variant),+];
            fn label(self) -> &'static str {
                match self { $($name::$variant => $value),+ }
            }
            fn index(self) -> usize {
                self as usize
            }
        }
    };
}
pub(crate) use label_values;

/// A family with one label, and its series for every value of `L`.
pub struct Labeled<M, L> {
    series: Vec<M>,
    label: PhantomData<L>,
}

// Not derived: deriving would also ask `L: Clone`, which is only a marker here.
impl<M: Clone, L> Clone for Labeled<M, L> {
    fn clone(&self) -> Self {
        Labeled {
            series: self.series.clone(),
            label: PhantomData,
        }
    }
}

impl<M, L: LabelValue> Labeled<M, L> {
    /// Makes the series of every value of `L` in `family` (whose one label is `L`'s).
    pub fn of<T>(family: &MetricVec<T>) -> Self
    where
        T: MetricVecBuilder<M = M>,
    {
        Labeled {
            series: L::ALL
                .iter()
                .map(|value| family.with_label_values(&[value.label()]))
                .collect(),
            label: PhantomData,
        }
    }

    /// The series of `value`.
    pub fn at(&self, value: L) -> &M {
        &self.series[value.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{IntCounterVec, Opts};

    label_values!(
        /// A test label.
        Colour { Red = "red", Green = "green" }
    );

    #[test]
    fn every_value_has_its_own_series_from_the_start() {
        let family = IntCounterVec::new(Opts::new("t_total", "t"), &["colour"]).unwrap();
        let colours: Labeled<_, Colour> = Labeled::of(&family);
        colours.at(Colour::Green).inc();
        colours.at(Colour::Green).inc();
        assert_eq!(family.with_label_values(&["green"]).get(), 2);
        assert_eq!(family.with_label_values(&["red"]).get(), 0);
        assert_eq!(Colour::ALL, &[Colour::Red, Colour::Green]);
        assert_eq!(Colour::Green.index(), 1);
    }
}
