//! The key/value cache of a decoder: per layer, keys and values `[batch, kv_heads, seq, head_dim]`
//! in buffers with headroom, shared copy-on-write between snapshots.

use std::sync::Arc;

use candle_core::Tensor;

/// Keys and values of every layer for the tokens seen so far, `[batch, kv_heads, seq, head_dim]`.
/// Cloning is cheap and a clone is a snapshot: extending one leaves the others intact, which is how
/// scoring reuses a shared prefix.
#[derive(Clone, Debug, Default)]
pub struct KvCache {
    layers: Vec<Option<LayerCache>>,
}

/// One layer's keys and values in buffers with spare room along the sequence axis, so a decoding step
/// writes one position in place instead of concatenating (copying) the whole cache. Clones share the
/// buffers copy-on-write: `owner` counts the clones, and one that appends while others hold the buffer
/// first copies its valid part into a buffer of its own.
#[derive(Clone, Debug)]
struct LayerCache {
    k: Tensor,
    v: Tensor,
    len: usize,
    owner: Arc<()>,
}

/// Positions a grown buffer keeps free beyond what it must hold (a generation's worth of steps).
const KV_HEADROOM: usize = 128;

impl LayerCache {
    fn capacity(&self) -> usize {
        self.k.dim(2).unwrap_or(0)
    }

    /// The cached keys and values, as views into the buffers.
    fn valid(&self) -> candle_core::Result<(Tensor, Tensor)> {
        Ok((self.k.narrow(2, 0, self.len)?, self.v.narrow(2, 0, self.len)?))
    }

    /// Appends `[b, h, t, d]` keys and values; returns views of everything cached.
    fn append(&mut self, k: &Tensor, v: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
        let t = k.dim(2)?;
        let shared = Arc::strong_count(&self.owner) > 1;
        if shared || self.len + t > self.capacity() {
            let capacity = (self.len + t + KV_HEADROOM).max(if shared { 0 } else { 2 * self.capacity() });
            let grow = |old: &Tensor| -> candle_core::Result<Tensor> {
                let (b, h, _, d) = old.dims4()?;
                let buffer = Tensor::zeros((b, h, capacity, d), old.dtype(), old.device())?;
                if self.len > 0 {
                    buffer.slice_set(&old.narrow(2, 0, self.len)?.contiguous()?, 2, 0)?;
                }
                Ok(buffer)
            };
            self.k = grow(&self.k)?;
            self.v = grow(&self.v)?;
            self.owner = Arc::new(());
        }
        self.k.slice_set(&k.contiguous()?, 2, self.len)?;
        self.v.slice_set(&v.contiguous()?, 2, self.len)?;
        self.len += t;
        self.valid()
    }

    /// A cache of its own made of rows of this one (the spare room comes along, so decoding goes on
    /// writing in place).
    fn select_rows(&self, rows: &Tensor) -> candle_core::Result<Self> {
        Ok(Self {
            k: self.k.index_select(rows, 0)?,
            v: self.v.index_select(rows, 0)?,
            len: self.len,
            owner: Arc::new(()),
        })
    }
}

impl KvCache {
    /// An empty cache for a decoder of `num_layers` layers.
    pub fn new(num_layers: usize) -> Self {
        Self { layers: vec![None; num_layers] }
    }

    /// Tokens cached so far.
    pub fn len(&self) -> usize {
        self.layers.first().and_then(|l| l.as_ref()).map(|l| l.len).unwrap_or(0)
    }

    /// Whether no token is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends one layer's new keys and values (`[batch, kv_heads, new, head_dim]`); returns everything
    /// that layer has cached, as views. A `layer` beyond the cache's layer count is an error.
    pub fn append(&mut self, layer: usize, k: Tensor, v: Tensor) -> candle_core::Result<(Tensor, Tensor)> {
        let layers = self.layers.len();
        let slot = self.layers.get_mut(layer).ok_or_else(|| {
            candle_core::Error::Msg(format!("key/value cache: layer {layer} of a {layers}-layer cache"))
        })?;
        match slot {
            Some(cache) => cache.append(&k, &v),
            None => {
                let mut cache =
                    LayerCache { k: k.narrow(2, 0, 0)?, v: v.narrow(2, 0, 0)?, len: 0, owner: Arc::new(()) };
                let out = cache.append(&k, &v)?;
                *slot = Some(cache);
                Ok(out)
            }
        }
    }

    /// A snapshot of the first `len` cached tokens (sharing the buffers copy-on-write, so extending it
    /// leaves this cache intact).
    pub fn truncated(&self, len: usize) -> Self {
        let layers =
            self.layers.iter().map(|l| l.as_ref().map(|l| LayerCache { len: l.len.min(len), ..l.clone() })).collect();
        Self { layers }
    }

    /// Keeps the given batch rows, in that order (finished sequences leave a generation batch).
    pub fn select_rows(&self, rows: &Tensor) -> candle_core::Result<Self> {
        let layers = self
            .layers
            .iter()
            .map(|l| l.as_ref().map(|l| l.select_rows(rows)).transpose())
            .collect::<candle_core::Result<_>>()?;
        Ok(Self { layers })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    /// `[batch, 1, t, 2]` keys whose values count up from `start` (so each position is recognisable).
    fn rows(batch: usize, t: usize, start: f32) -> Tensor {
        let data: Vec<f32> = (0..batch * t * 2).map(|i| start + i as f32).collect();
        Tensor::from_vec(data, (batch, 1, t, 2), &Device::Cpu).unwrap()
    }

    fn values(t: &Tensor) -> Vec<f32> {
        t.flatten_all().unwrap().to_vec1().unwrap()
    }

    #[test]
    fn appending_returns_everything_cached_in_order() {
        let mut cache = KvCache::new(2);
        assert!(cache.is_empty());
        let (k, v) = cache.append(0, rows(1, 3, 0.0), rows(1, 3, 100.0)).unwrap();
        assert_eq!((k.dims(), values(&v)[0]), (&[1, 1, 3, 2][..], 100.0));
        cache.append(1, rows(1, 3, 0.0), rows(1, 3, 0.0)).unwrap();
        assert_eq!(cache.len(), 3);
        // One decoding step after the other: each returns the whole history.
        for step in 0..200 {
            let (k, _) = cache.append(0, rows(1, 1, 1000.0 + step as f32), rows(1, 1, 0.0)).unwrap();
            assert_eq!(k.dim(2).unwrap(), 4 + step);
            let got = values(&k);
            assert_eq!(&got[..6], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
            assert_eq!(got[got.len() - 2], 1000.0 + step as f32);
        }
        assert_eq!(cache.len(), 203);
    }

    #[test]
    fn a_snapshot_is_not_changed_by_extending_a_clone_or_a_truncation() {
        let mut base = KvCache::new(1);
        base.append(0, rows(1, 4, 0.0), rows(1, 4, 0.0)).unwrap();
        let mut a = base.clone();
        let mut b = base.truncated(2);
        assert_eq!(b.len(), 2);
        let (ka, _) = a.append(0, rows(1, 1, 50.0), rows(1, 1, 50.0)).unwrap();
        let (kb, _) = b.append(0, rows(1, 1, 70.0), rows(1, 1, 70.0)).unwrap();
        assert_eq!(values(&ka)[6..], [6.0, 7.0, 50.0, 51.0]);
        assert_eq!(values(&kb), [0.0, 1.0, 2.0, 3.0, 70.0, 71.0]);
        // The base still holds its four positions, unchanged by either continuation.
        assert_eq!(base.len(), 4);
        let (k, _) = base.clone().append(0, rows(1, 1, 90.0), rows(1, 1, 90.0)).unwrap();
        assert_eq!(values(&k), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 90.0, 91.0]);
        assert_eq!(base.len(), 4);
    }

    #[test]
    fn selected_rows_keep_their_history_and_go_on_growing() {
        let mut cache = KvCache::new(1);
        cache.append(0, rows(3, 2, 0.0), rows(3, 2, 0.0)).unwrap();
        let mut kept = cache.select_rows(&Tensor::new(&[2u32, 0], &Device::Cpu).unwrap()).unwrap();
        let (k, _) = kept.append(0, rows(2, 1, 100.0), rows(2, 1, 100.0)).unwrap();
        assert_eq!(k.dims(), &[2, 1, 3, 2]);
        // Row 2 of the batch first (its keys start at 8), then row 0.
        assert_eq!(values(&k)[..4], [8.0, 9.0, 10.0, 11.0]);
        assert_eq!(values(&k)[6..10], [0.0, 1.0, 2.0, 3.0]);
        assert_eq!(k.dtype(), DType::F32);
    }

    #[test]
    fn a_layer_outside_the_cache_is_an_error_not_a_panic() {
        let mut cache = KvCache::new(1);
        let e = cache.append(3, rows(1, 1, 0.0), rows(1, 1, 0.0)).unwrap_err();
        assert!(e.to_string().contains("layer 3 of a 1-layer cache"), "{e}");
    }
}
