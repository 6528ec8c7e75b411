"""TPC-H as a galaxy published to Tableau: `tpch/`'s tables and keys, one data source per fact.

TPC-H's keys make a galaxy, not a star: `lineitem` and `partsupp` are facts (no key
references them) sharing `part` and `supplier`, and `lineitem` reaches `nation` and
`region` two ways, through its order's customer and through its supplier. The `.hyper`
file keeps that model as it is; the publish makes each data source the tree Tableau takes,
with a copy of `nation` and of `region` per way `lineitem` reaches them
(docs/publishing.md, "One tree per data source, made from your model").

`galaxy.datasources`: the data sources; `galaxy.definitions`: the code location
(`dagster dev -m galaxy.definitions`).
"""
