//! The dashboard's graph layout, computed on the server so the page needs no layout library.
//!
//! Layered, left to right: a vertex's layer is its longest path from a source; inside a
//! layer, vertices are ordered by the barycenter of their neighbours' positions, sweeping
//! forward and backward four times. Each layer is centred on the tallest one. The result is
//! deterministic (ties keep plan order).

/// Width of a vertex box, in SVG units.
pub const NODE_W: f64 = 230.0;
/// Height of a vertex box.
pub const NODE_H: f64 = 112.0;
const GAP_X: f64 = 120.0;
const GAP_Y: f64 = 36.0;
const MARGIN: f64 = 16.0;

/// Where a vertex goes: its top-left corner, its layer and its place in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placed {
    /// Left edge.
    pub x: f64,
    /// Top edge.
    pub y: f64,
    /// Longest path from a source.
    pub layer: usize,
    /// Position inside the layer, from the top.
    pub order: usize,
}

/// The layout of a graph of `n` vertices whose edge list is `(from, to)`, with the total
/// width and height.
pub fn layout(n: usize, edges: &[(usize, usize)]) -> (Vec<Placed>, f64, f64) {
    // Longest path from a source, by relaxation in topological order (Kahn); vertices on a
    // cycle (there should be none) keep layer 0.
    let mut indeg = vec![0usize; n];
    for &(_, t) in edges {
        indeg[t] += 1;
    }
    let mut layer = vec![0usize; n];
    let mut ready: Vec<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
    ready.reverse();
    while let Some(v) = ready.pop() {
        for &(f, t) in edges {
            if f == v {
                layer[t] = layer[t].max(layer[v] + 1);
                indeg[t] -= 1;
                if indeg[t] == 0 {
                    ready.push(t);
                }
            }
        }
    }
    let layers = layer.iter().copied().max().map_or(0, |m| m + 1);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); layers];
    for v in 0..n {
        rows[layer[v]].push(v);
    }
    let mut pos = vec![0f64; n];
    let set_pos = |rows: &Vec<Vec<usize>>, pos: &mut Vec<f64>| {
        for row in rows {
            for (i, &v) in row.iter().enumerate() {
                pos[v] = i as f64;
            }
        }
    };
    set_pos(&rows, &mut pos);
    for sweep in 0..8 {
        let forward = sweep % 2 == 0;
        let order: Vec<usize> = if forward {
            (1..layers).collect()
        } else {
            (0..layers.saturating_sub(1)).rev().collect()
        };
        for l in order {
            let mut keyed: Vec<(f64, usize, usize)> = rows[l]
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let neighbours: Vec<f64> = edges
                        .iter()
                        .filter_map(|&(f, t)| {
                            if forward && t == v {
                                Some(pos[f])
                            } else if !forward && f == v {
                                Some(pos[t])
                            } else {
                                None
                            }
                        })
                        .collect();
                    let bary = if neighbours.is_empty() {
                        i as f64
                    } else {
                        neighbours.iter().sum::<f64>() / neighbours.len() as f64
                    };
                    (bary, i, v)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            rows[l] = keyed.into_iter().map(|(_, _, v)| v).collect();
            set_pos(&rows, &mut pos);
        }
    }
    let tallest = rows.iter().map(Vec::len).max().unwrap_or(0);
    let height = MARGIN * 2.0 + tallest as f64 * NODE_H + tallest.saturating_sub(1) as f64 * GAP_Y;
    let width = MARGIN * 2.0 + layers as f64 * NODE_W + layers.saturating_sub(1) as f64 * GAP_X;
    let mut placed = vec![
        Placed {
            x: 0.0,
            y: 0.0,
            layer: 0,
            order: 0
        };
        n
    ];
    for (l, row) in rows.iter().enumerate() {
        let column = row.len() as f64 * NODE_H + row.len().saturating_sub(1) as f64 * GAP_Y;
        let top = (height - column) / 2.0;
        for (i, &v) in row.iter().enumerate() {
            placed[v] = Placed {
                x: MARGIN + l as f64 * (NODE_W + GAP_X),
                y: top + i as f64 * (NODE_H + GAP_Y),
                layer: l,
                order: i,
            };
        }
    }
    (placed, width, height)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_are_longest_paths_and_coordinates_are_golden() {
        // 0 -> 1 -> 3, 0 -> 3, 2 -> 3 -> 4: a join whose inputs sit at different depths.
        let (p, w, h) = layout(5, &[(0, 1), (1, 3), (0, 3), (2, 3), (3, 4)]);
        let layers: Vec<usize> = p.iter().map(|p| p.layer).collect();
        assert_eq!(layers, vec![0, 1, 0, 2, 3]);
        assert_eq!(w, 16.0 * 2.0 + 4.0 * 230.0 + 3.0 * 120.0);
        assert_eq!(h, 16.0 * 2.0 + 2.0 * 112.0 + 36.0);
        assert_eq!((p[0].x, p[0].y), (16.0, 16.0));
        assert_eq!((p[2].x, p[2].y), (16.0, 16.0 + 112.0 + 36.0));
        // Layers with one vertex are centred.
        assert_eq!(p[4].y, (h - 112.0) / 2.0);
        assert_eq!(layout(5, &[(0, 1), (1, 3), (0, 3), (2, 3), (3, 4)]).0, p);
    }

    #[test]
    fn barycenters_uncross_edges() {
        // Sources 0, 1 feed 3 and 2 respectively: 3 and 2 should swap to follow them.
        let (p, _, _) = layout(4, &[(0, 3), (1, 2)]);
        assert_eq!((p[3].order, p[2].order), (0, 1));
        assert_eq!(layout(0, &[]).0, vec![]);
    }
}
