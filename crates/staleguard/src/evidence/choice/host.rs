//! The items a host names, grounded in the chunks the browser returned and fitted in the caps.

use std::collections::HashSet;

use crate::urlnorm::normalise;

use crate::evidence::candidates::{Chunk, Fast, Gathered};
use crate::evidence::report::{DropReason, EvidenceItem, Limits, Quote, Selection};

use super::chosen::Candidate;

/// Grounds explicit items in every chunk, dedups them and applies the caps. The collapsed
/// pages' own quotes are not chosen here: they are written inside them (SPEC 9, C2).
pub(crate) fn select(explicit: &[EvidenceItem], g: &Gathered<'_>, limits: Limits) -> Selection {
    let mut selection = Selection::default();
    let mut grounded = Vec::new();
    for item in explicit {
        match ground(item, g.all()) {
            Ok(quote) => grounded.push(quote),
            Err(reason) => selection.dropped.push((item.clone(), reason)),
        }
    }
    let explicit = grounded.iter().map(|q| Candidate {
        url: &q.source_url,
        key: normalise(&q.source_url),
        observation: &q.observation,
        text: &q.quote,
    });
    let mut seen: HashSet<(String, &str), Fast> = HashSet::default();
    // Kept quotes with their sizes, in order.
    let mut kept: Vec<(Candidate<'_>, usize)> = Vec::new();
    let mut bytes = 0;
    for candidate in explicit {
        if !seen.insert((candidate.key.clone(), candidate.text))
            || kept.iter().any(|(k, _)| candidate.is_inside(k))
        {
            continue;
        }
        if candidate.text.len() > limits.max_quote_bytes {
            selection.refused.push(candidate.quote());
            continue;
        }
        // A longer quote that holds kept ones replaces them.
        let inside: Vec<bool> = kept.iter().map(|(k, _)| k.is_inside(&candidate)).collect();
        let replaced = inside.iter().filter(|&&i| i).count();
        let freed: usize = kept
            .iter()
            .zip(&inside)
            .filter(|(_, &i)| i)
            .map(|((_, size), _)| size)
            .sum();
        // Its line is rendered only when the item cap leaves room for it.
        let size = (kept.len() - replaced < limits.max_items)
            .then(|| candidate.size())
            .filter(|size| bytes - freed + size <= limits.max_bytes);
        if replaced > 0 {
            // Kept quotes inside this one move behind the others, whether it is kept or not.
            let (inner, others): (Vec<_>, Vec<_>) =
                kept.into_iter().zip(inside).partition(|(_, i)| *i);
            kept = others.into_iter().map(|(k, _)| k).collect();
            if size.is_some() {
                bytes -= freed;
            } else {
                kept.extend(inner.into_iter().map(|(k, _)| k));
            }
        }
        if let Some(size) = size {
            bytes += size;
            kept.push((candidate, size));
        }
    }
    selection.quotes = kept.iter().map(|(k, _)| k.quote()).collect();
    selection
}

/// Checks an explicit item against the chunks the browser returned.
pub(crate) fn ground<'t>(
    item: &EvidenceItem,
    chunks: impl Iterator<Item = Chunk<'t>>,
) -> Result<Quote, DropReason> {
    let of_observation: Vec<Chunk> = chunks
        .filter(|c| c.observation == item.observation || c.document == Some(&item.observation))
        .collect();
    if of_observation.is_empty() {
        return Err(DropReason::UnknownObservation);
    }
    let url = normalise(&item.source_url);
    let at_url: Vec<&Chunk> = of_observation.iter().filter(|c| *c.key == *url).collect();
    if at_url.is_empty() {
        return Err(DropReason::UrlMismatch);
    }
    if item.quote.trim().is_empty() || !at_url.iter().any(|c| c.text.contains(item.quote.as_str()))
    {
        return Err(DropReason::NotInPage);
    }
    Ok(Quote {
        source_url: item.source_url.clone(),
        observation: item.observation.clone(),
        quote: item.quote.clone(),
    })
}
