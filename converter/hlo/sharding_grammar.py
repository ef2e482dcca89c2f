"""The grammar of shardings (HloSharding::ToString: tile assignments, iota device lists,
subgroups, named shardings over meshes) and of meshes and replica groups."""

from __future__ import annotations

import math
import re

from converter.hlo import attrs
from converter.hlo.collectives import MAX_DEVICES
from converter.hlo.lexer import Cursor, _RE_GROUP, _RE_GROUPS, _RE_IDENT, _W


def groups_from_iota(iota: attrs.IotaDeviceList) -> attrs.ReplicaGroups:
    ids = iota.device_ids()
    if len(iota.shape) != 2:
        raise ValueError("iota replica groups need a 2-D [groups, group size] shape")
    g, n = iota.shape
    return attrs.ReplicaGroups(tuple(tuple(ids[i * n : (i + 1) * n]) for i in range(g)), iota)


class ShardingGrammar(Cursor):
    def device_count(self, dims: tuple[int, ...], pos: int, what: str) -> int:
        """The number of devices `dims` lay out (Python ints: no int64 wrap-around); an
        error at `pos` for a size below 1 or a count past MAX_DEVICES."""
        if any(d < 1 for d in dims):
            raise self.error("", pos, f"{what} {list(dims)}: a size below 1")
        n = math.prod(dims)
        if n > MAX_DEVICES:
            raise self.error("", pos, f"{what} {list(dims)}: {n} devices, more than {MAX_DEVICES}")
        return n

    # ------------------------------------------------------------- meshes (V3)
    def mesh(self) -> attrs.Mesh:
        """`mesh['x'=2,'y'=4]`, then optionally `, device_ids=(0,2,1,3)` or
        `, device_ids=([2,2]T(1,0))`.  Axis names are single-quoted strings."""
        start = self.skip(self.p)
        if not self.s.startswith("mesh", start):
            raise self.error("'mesh['", start)
        self.p = start + 4
        self.expect("[")
        axes: list[tuple[str, int]] = []
        if not self.accept("]"):
            while True:
                axis = self.string()
                self.expect("=")
                axes.append((axis, self.int_()))
                if self.accept("]"):
                    break
                self.expect(",")
        if len({a for a, _ in axes}) != len(axes):
            raise self.error("", start, "a mesh axis is named twice")
        n = self.device_count(tuple(size for _, size in axes), start, "mesh axis sizes")
        device_ids: tuple[int, ...] = ()
        iota = None
        q = self.skip(self.p)
        if self.s.startswith(",", q) and re.compile(_W + r"device_ids=", re.S).match(self.s, q + 1):
            self.p = q + 1
            self.key()
            self.expect("(")
            p = self.skip(self.p)
            if self.s.startswith("[", p):
                m = re.compile(r"\[([\d,\s]+)\]" + _W + r"(?:T\(([\d,\s]+)\))?", re.S).match(self.s, p)
                if m is None:
                    raise self.error("device ids '([2,2]T(1,0))'", p)
                self.p = m.end()
                reshape = tuple(int(x) for x in m.group(1).split(","))
                perm = tuple(int(x) for x in m.group(2).split(",")) if m.group(2) else ()
                if perm and sorted(perm) != list(range(len(reshape))):
                    raise self.error("a permutation", p, f"'{m.group(0)}'")
                iota = attrs.IotaDeviceList(tuple(n for _, n in axes), reshape, perm)
            else:
                ids = [self.int_()]
                while self.accept(","):
                    ids.append(self.int_())
                device_ids = tuple(ids)
            self.expect(")")
        listed = len(device_ids) if device_ids else math.prod(iota.reshape_dims) if iota is not None else n
        if listed != n:  # counted, not expanded: a typo'd iota size would exhaust memory
            raise self.error("", start, f"the mesh has {n} devices but lists {listed} device ids")
        return attrs.Mesh(tuple(axes), device_ids, iota)

    def axis_ref(self) -> attrs.MeshAxisRef:
        """`'x'` or the sub-axis `'x':(pre_size)size`."""
        name = self.string()
        p = self.skip(self.p)
        if self.s.startswith(":", p):
            m = re.compile(r":\s*\(\s*(\d+)\s*\)\s*(\d+)").match(self.s, p)
            if m is None:
                raise self.error("a sub-axis ':(pre_size)size'", p)
            self.p = m.end()
            if int(m.group(1)) < 1 or int(m.group(2)) < 1:
                raise self.error("a sub-axis of positive sizes", p)
            return attrs.MeshAxisRef(name, int(m.group(1)), int(m.group(2)))
        return attrs.MeshAxisRef(name)

    def axis_refs(self) -> tuple[attrs.MeshAxisRef, ...]:
        self.expect("{")
        refs: list[attrs.MeshAxisRef] = []
        if not self.accept("}"):
            while True:
                refs.append(self.axis_ref())
                if self.accept("}"):
                    break
                self.expect(",")
        return tuple(refs)

    def mesh_groups(self) -> attrs.ReplicaGroups:
        """`mesh['x'=2,'y'=2] {'y'}`: groups of the devices that differ only along the
        listed axes (see converter.hlo.mesh.replica_groups)."""
        from converter.hlo.mesh import replica_groups

        start = self.skip(self.p)
        mesh = self.mesh()
        refs_pos = self.skip(self.p)
        refs = self.axis_refs()
        try:
            groups = replica_groups(mesh, refs)
        except ValueError as e:
            raise self.error("", refs_pos, f"bad mesh replica groups: {e}") from None
        return attrs.ReplicaGroups(groups, mesh_text=self.s[start : self.p], mesh=mesh, mesh_axes=refs)

    def v_pairs(self) -> list[tuple[int, int]]:
        m = self.regex(_RE_GROUPS, "source-target pairs '{{0,1},{1,2}}'")
        pairs = []
        for g in _RE_GROUP.findall(m.group(1)):
            vals = [int(x) for x in g.split(",") if x.strip()]
            if len(vals) != 2:
                raise self.error("pairs of two device ids", m.start(), f"'{{{g}}}'")
            pairs.append((vals[0], vals[1]))
        return pairs

    # ------------------------------------------------------------------ shardings
    _RE_SHARDING_ITEM = re.compile(r"(replicated|manual|unknown|unreduced|maximal|last_tile_dim_replicate"
                                   r"|shard_as|shard_like)(?![\w.\-])|(devices|device|last_tile_dims|metadata)=")

    def v_sharding(self) -> attrs.Sharding:
        """`{replicated}`, `{devices=[2,1]<=[2] last_tile_dim_replicate metadata={...}}`,
        a tuple `{{...}, {...}}`, a mesh sharding `{mesh[...], [...]}`, ..."""
        start = self.skip(self.p)
        self.expect("{")
        p = self.skip(self.p)
        s = self.s
        if s.startswith("}", p):
            self.p = p + 1
            return attrs.Sharding("tuple")
        if s.startswith("{", p):
            elements = [self.v_sharding()]
            while self.accept(","):
                elements.append(self.v_sharding())
            self.expect("}")
            return attrs.Sharding("tuple", elements=tuple(elements))
        if re.compile(r"(mesh|maximal_mesh|single_device)(?![\w.\-])").match(s, p):
            return self.named_sharding(start)
        kind = ""
        tile_dims: tuple[int, ...] = ()
        devices: tuple[int, ...] = ()
        iota = None
        replicate = False
        last_tile_dims: tuple[str, ...] = ()
        device: int | None = None  # XLA takes any integer, negative ones too
        group = ("", -1)
        metadata = ""
        seen: set[str] = set()
        while True:
            p = self.skip(self.p)
            if s.startswith("}", p):
                self.p = p + 1
                break
            m = self._RE_SHARDING_ITEM.match(s, p)
            if m is None:
                raise self.error("a sharding item (replicated, manual, maximal device=N, devices=[...], "
                                 "last_tile_dim_replicate, last_tile_dims={...}, shard_as N, metadata={...}) or '}'", p)
            word = m.group(1) or m.group(2)
            if word in seen or (word in ("replicated", "manual", "unknown", "unreduced", "maximal") and kind):
                raise self.error("", p, f"'{word}' given twice in one sharding" if word in seen
                                 else f"'{word}' in a sharding that is already '{kind}'")
            seen.add(word)
            self.p = m.end()
            if word in ("replicated", "manual", "unknown", "unreduced", "maximal"):
                kind = word
            elif word == "device":
                device = self.int_()
            elif word == "devices":
                tile_dims, devices, iota = self.tile_assignment(p)
            elif word == "last_tile_dim_replicate":
                replicate = True
            elif word == "last_tile_dims":
                types = self.v_idents()
                bad = [t for t in types if t not in ("manual", "replicated", "maximal", "unreduced")]
                if bad or not types:
                    raise self.error("last_tile_dims types (manual, replicated, maximal, unreduced)", p)
                last_tile_dims = tuple(types)
            elif word in ("shard_as", "shard_like"):
                group = (word[6:], self.int_())
            else:  # metadata: `{...}` or a list `{{...}, {...}}`, kept as its text
                metadata = self.balanced("sharding metadata '{op_name=...}'")
        if kind == "maximal":
            if device is None:
                raise self.error("", start, "a maximal sharding needs 'device=N'")
            return attrs.Sharding("maximal", device=device, shard_group=group, metadata=metadata)
        if device is not None:
            raise self.error("", start, "'device=' belongs to a maximal sharding")
        if kind:
            if tile_dims:
                raise self.error("", start, f"a {kind} sharding has no 'devices='")
            return attrs.Sharding(kind, shard_group=group, metadata=metadata)
        if not tile_dims:
            raise self.error("", start, "a sharding needs 'replicated', 'manual', 'maximal', 'devices=' or another kind")
        if replicate and last_tile_dims:
            raise self.error("", start, "last_tile_dim_replicate and last_tile_dims= together")
        if len(tile_dims) < len(last_tile_dims) + replicate:
            raise self.error("", start, "more subgroup dimensions than tile dimensions")
        return attrs.Sharding("tiled", tile_dims, devices, iota, replicate, last_tile_dims,
                          shard_group=group, metadata=metadata)

    def tile_assignment(self, pos: int) -> tuple[tuple[int, ...], tuple[int, ...], attrs.IotaDeviceList | None]:
        """`[2,2]<=[4]`, `[2,2]<=[2,2]T(1,0)` or `[2,2]0,2,1,3` after `devices=`."""
        m = self.regex(re.compile(r"\[([\d,\s]+)\]"), "tile dimensions '[2,2]'")
        tile_dims = tuple(int(x) for x in m.group(1).split(","))
        n = self.device_count(tile_dims, m.start(), "tile assignment")
        q = self.skip(self.p)
        iota = None
        if self.s.startswith("<=", q):
            im = re.compile(r"<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?").match(self.s, q)
            if im is None:
                raise self.error("an iota tile assignment '<=[4]' or '<=[2,2]T(1,0)'", q)
            self.p = im.end()
            reshape = tuple(int(x) for x in im.group(1).split(","))
            perm = tuple(int(x) for x in im.group(2).split(",")) if im.group(2) else ()
            if perm and sorted(perm) != list(range(len(reshape))):
                raise self.error("a permutation", q, f"'{im.group(0)}'")
            iota = attrs.IotaDeviceList(tile_dims, reshape, perm)
            if math.prod(reshape) != n:
                raise self.error("", pos, f"{math.prod(reshape)} devices for a {list(tile_dims)} tile assignment")
            return tile_dims, tuple(iota.device_ids()), iota
        devices = [self.int_()]
        while self.accept(","):
            devices.append(self.int_())
        if len(devices) != n:
            raise self.error("", pos, f"{len(devices)} devices for a {list(tile_dims)} tile assignment")
        return tile_dims, tuple(devices), iota

    def named_sharding(self, start: int) -> attrs.Sharding:
        """After `{`: `mesh[...]` (+ device ids), then `, [{'x'}, {}]` (per dimension) or
        `, replicated` / `, manual` / `, unreduced`, then `, replicated={'y'}`-style axis
        lists and `, metadata={{...}}`; or `maximal_mesh[device_id=N]`, which jax 0.12's XLA
        prints as `single_device[device_id=N]` (the same sharding: one device holds the value;
        `device_id=` is one token there, so no space before its `=`, and N may be negative)."""
        from converter.hlo.mesh import named_to_tiled

        s = self.s
        p = self.skip(self.p)
        metadata = ""
        if s.startswith("maximal_mesh", p) or s.startswith("single_device", p):
            m = re.compile(r"(maximal_mesh|single_device)" + _W + r"\[" + _W + r"device_id=" + _W + r"(-?\d+)" + _W
                           + r"\]", re.S).match(s, p)
            if m is None:
                raise self.error("'single_device[device_id=N]' or 'maximal_mesh[device_id=N]'", p)
            self.p = m.end()
            named = attrs.NamedSharding(None, kind="maximal", maximal_device=int(m.group(2)))
        else:
            mesh = self.mesh()
            dims: list[tuple[tuple[attrs.MeshAxisRef, ...], bool]] = []
            kind = ""
            lists: dict[str, tuple[attrs.MeshAxisRef, ...]] = {}
            while self.accept(","):
                q = self.skip(self.p)
                if s.startswith("[", q):
                    self.p = q + 1
                    if not self.accept("]"):
                        while True:
                            dims.append(self.dim_sharding())
                            if self.accept("]"):
                                break
                            self.expect(",")
                    continue
                word = _RE_IDENT.match(s, q)
                if word is None or word.group(0) not in ("replicated", "manual", "unreduced", "metadata"):
                    raise self.error("'[...]' dimension shardings, 'replicated', 'manual', 'unreduced' or 'metadata='", q)
                self.p = word.end()
                if not s.startswith("=", self.p):
                    if word.group(0) == "metadata":
                        raise self.error("'='")
                    kind = word.group(0)
                elif word.group(0) == "metadata":
                    self.p += 1
                    metadata = self.balanced("sharding metadata '{{op_name=...}}'")
                else:
                    self.p += 1
                    lists[word.group(0)] = self.axis_refs()
            named = attrs.NamedSharding(mesh, tuple(dims), kind, lists.get("replicated", ()),
                                    lists.get("unreduced", ()), lists.get("manual", ()))
        q = self.skip(self.p)
        if s.startswith(",", q) and not metadata:
            self.p = q + 1
            if self.key("'metadata='") != "metadata":
                raise self.error("'metadata='", q + 1)
            metadata = self.balanced("sharding metadata '{{op_name=...}}'")
        self.expect("}")
        try:
            return named_to_tiled(named, metadata)
        except ValueError as e:
            raise self.error("", start, f"bad mesh sharding: {e}") from None

    def dim_sharding(self) -> tuple[tuple[attrs.MeshAxisRef, ...], bool]:
        """`{'x', 'y'}`, `{'x', ?}` (open: may be split further) or `{?}`."""
        self.expect("{")
        refs: list[attrs.MeshAxisRef] = []
        is_open = False
        if not self.accept("}"):
            while True:
                if self.accept("?"):
                    is_open = True
                    self.expect("}")
                    break
                refs.append(self.axis_ref())
                if self.accept("}"):
                    break
                self.expect(",")
        return tuple(refs), is_open

    def v_shardings(self) -> list[attrs.Sharding]:
        sharding = self.v_sharding()
        return list(sharding.elements) if sharding.kind == "tuple" else [sharding]

