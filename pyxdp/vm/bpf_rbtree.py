"""The BPF red-black tree: the ``bpf_rbtree_add_impl``, ``bpf_rbtree_remove``,
``bpf_rbtree_first``, ``bpf_rbtree_root``, ``bpf_rbtree_left`` and
``bpf_rbtree_right`` kfuncs and ``bpf_rb_root_free`` of ``kernel/bpf/helpers.c``,
over the insert and erase rebalancing of ``lib/rbtree.c`` (Linux 6.18).

A ``struct bpf_rb_root`` (16 bytes, in a map value, global data or an object) is the
kernel's ``struct rb_root_cached`` (the root node, the leftmost node); a zeroed
one is an empty tree. A ``struct bpf_rb_node`` (32 bytes, in an object of
:mod:`pyxdp.vm.memalloc`) is ``struct bpf_rb_node_kern``: an ``rb_node``
(parent and colour in one word, right child, left child) and its owner (the
root whose tree it is in, NULL when in none). The words hold the fake addresses
programs see, so both engines walk the same trees: ``bpf_rbtree_root``,
``bpf_rbtree_left`` and ``bpf_rbtree_right`` show programs the tree's shape,
which is why the rebalancing is the kernel's, case by case (the shapes a
program walks equal Linux's). The JIT's twins below do in native code what the
Python kfuncs do; the add's twin calls the program's ``less`` callback entry
directly.

The verifier (``pyxdp.verifier``) makes every call hold the root's
``bpf_spin_lock``, hands ``bpf_rbtree_add`` owned objects only (one already in a
tree is a refcounted object's: the add drops that reference and fails) and
gives the remove, first, root, left and right node pointers the offset of the
node in its struct.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pyxdp.asm.opcodes import MAX_CALL_FRAMES
from pyxdp.errors import HelperFault
from pyxdp.vm.context import neg
from pyxdp.vm.jit.abi import SLOW, Natives
from pyxdp.vm.jit.ir import Text, c64, ret_if
from pyxdp.vm.jit.natives import (
    HelperNative,
    host_or_slow,
    register_kfunc,
    register_shared,
)
from pyxdp.vm.memalloc import ARENA_BASE, ARENA_SIZE, arena, map_arena, register_root_free

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["RBTREE_KFUNCS", "free_trees"]

# struct bpf_rb_node_kern: rb_node {__rb_parent_color, rb_right, rb_left}, owner
_PC, _RIGHT, _LEFT, _OWNER = 0, 8, 16, 24
_NODE_SIZE = 32
# struct rb_root_cached: rb_root {rb_node}, rb_leftmost
_ROOT, _LEFTMOST = 0, 8
_RED, _BLACK = 0, 1
# BPF_PTR_POISON (x86-64's POISON_POINTER_DELTA + 0xeB9F): a node's owner while
# __bpf_rbtree_add places it
_POISON = 0xDEAD_0000_0000_EB9F
# More steps than any walk of one operation takes (a path is never longer than the
# objects the arena holds): only a tree an unverified program corrupted into a cycle
# reaches it.
_MAX_STEPS = ARENA_SIZE // 16


class _Tree:
    """One tree's words through a memory (``load``/``store`` of fake addresses)."""

    __slots__ = ("ld", "st", "root", "steps")

    def __init__(self, mem: Any, root: int) -> None:
        self.ld: Callable[[int, int], int] = lambda a, off: int(mem.load(a + off, 8))
        self.st: Callable[[int, int, int], None] = lambda a, off, v: mem.store(a + off, 8, v)
        self.root = root
        self.steps = _MAX_STEPS

    def tick(self) -> None:
        """One step of a walk; a corrupt tree (a cycle) faults instead of looping."""
        self.steps -= 1
        if self.steps < 0:
            raise HelperFault(f"rbtree at {self.root:#x} is corrupt (its nodes make a cycle)")

    # -- lib/rbtree.c's helpers --------------------------------------------------------
    def change_child(self, old: int, new: int, parent: int) -> None:
        if parent:
            self.st(parent, _LEFT if self.ld(parent, _LEFT) == old else _RIGHT, new)
        else:
            self.st(self.root, _ROOT, new)

    def rotate_set_parents(self, old: int, new: int, color: int) -> None:
        pc = self.ld(old, _PC)
        self.st(new, _PC, pc)
        self.st(old, _PC, new | color)
        self.change_child(old, new, pc & ~3)

    def set_parent(self, n: int, p: int) -> None:
        self.st(n, _PC, (self.ld(n, _PC) & 1) | p)

    def is_black(self, n: int) -> bool:
        return bool(self.ld(n, _PC) & 1)

    def insert_color(self, node: int) -> None:
        """``__rb_insert``: rebalance after ``node`` was linked in (red)."""
        ld, st = self.ld, self.st
        parent = ld(node, _PC)
        while True:
            self.tick()
            if not parent:
                st(node, _PC, _BLACK)
                return
            if self.is_black(parent):
                return
            gparent = ld(parent, _PC)
            # the mirrored halves: parent is gparent's left child, or its right one
            near, far = (_LEFT, _RIGHT) if ld(gparent, _RIGHT) != parent else (_RIGHT, _LEFT)
            tmp = ld(gparent, far)
            if tmp and not self.is_black(tmp):  # case 1: colour flips, go up
                st(tmp, _PC, gparent | _BLACK)
                st(parent, _PC, gparent | _BLACK)
                node = gparent
                parent = ld(node, _PC) & ~3
                st(node, _PC, parent | _RED)
                continue
            tmp = ld(parent, far)
            if node == tmp:  # case 2: rotate at parent
                tmp = ld(node, near)
                st(parent, far, tmp)
                st(node, near, parent)
                if tmp:
                    st(tmp, _PC, parent | _BLACK)
                st(parent, _PC, node | _RED)
                parent = node
                tmp = ld(node, far)
            # case 3: rotate at gparent
            st(gparent, near, tmp)
            st(parent, far, gparent)
            if tmp:
                st(tmp, _PC, gparent | _BLACK)
            self.rotate_set_parents(gparent, parent, _RED)
            return

    def erase(self, node: int) -> None:
        """``__rb_erase``: unlink ``node`` and rebalance."""
        ld, st = self.ld, self.st
        child, tmp = ld(node, _RIGHT), ld(node, _LEFT)
        if not tmp:
            pc = ld(node, _PC)
            parent = pc & ~3
            self.change_child(node, child, parent)
            if child:
                st(child, _PC, pc)
                rebalance = 0
            else:
                rebalance = parent if pc & 1 else 0
        elif not child:
            pc = ld(node, _PC)
            st(tmp, _PC, pc)
            self.change_child(node, tmp, pc & ~3)
            rebalance = 0
        else:
            successor = child
            tmp = ld(child, _LEFT)
            if not tmp:
                parent = successor
                child2 = ld(successor, _RIGHT)
            else:
                while tmp:
                    self.tick()
                    parent = successor
                    successor = tmp
                    tmp = ld(tmp, _LEFT)
                child2 = ld(successor, _RIGHT)
                st(parent, _LEFT, child2)
                st(successor, _RIGHT, child)
                self.set_parent(child, successor)
            tmp = ld(node, _LEFT)
            st(successor, _LEFT, tmp)
            self.set_parent(tmp, successor)
            pc = ld(node, _PC)
            self.change_child(node, successor, pc & ~3)
            if child2:
                st(successor, _PC, pc)
                st(child2, _PC, parent | _BLACK)
                rebalance = 0
            else:
                pc2 = ld(successor, _PC)
                st(successor, _PC, pc)
                rebalance = parent if pc2 & 1 else 0
        if rebalance:
            self.erase_color(rebalance)

    def erase_color(self, parent: int) -> None:
        """``__rb_erase_color``: restore the black heights after an erase."""
        ld, st = self.ld, self.st
        node = 0
        while True:
            self.tick()
            sibling = ld(parent, _RIGHT)
            # node is parent's left child (the sibling right), or its right one
            near, far = (_LEFT, _RIGHT) if node != sibling else (_RIGHT, _LEFT)
            if near == _RIGHT:
                sibling = ld(parent, _LEFT)
            if not self.is_black(sibling):  # case 1: rotate at parent
                tmp1 = ld(sibling, near)
                st(parent, far, tmp1)
                st(sibling, near, parent)
                st(tmp1, _PC, parent | _BLACK)
                self.rotate_set_parents(parent, sibling, _RED)
                sibling = tmp1
            tmp1 = ld(sibling, far)
            if not tmp1 or self.is_black(tmp1):
                tmp2 = ld(sibling, near)
                if not tmp2 or self.is_black(tmp2):  # case 2: sibling colour flip
                    st(sibling, _PC, parent | _RED)
                    if not self.is_black(parent):
                        st(parent, _PC, ld(parent, _PC) | _BLACK)
                    else:
                        node = parent
                        parent = ld(node, _PC) & ~3
                        if parent:
                            continue
                    return
                # case 3: rotate at sibling
                tmp1 = ld(tmp2, far)
                st(sibling, near, tmp1)
                st(tmp2, far, sibling)
                st(parent, far, tmp2)
                if tmp1:
                    st(tmp1, _PC, sibling | _BLACK)
                tmp1 = sibling
                sibling = tmp2
            # case 4: rotate at parent, colour flips
            tmp2 = ld(sibling, near)
            st(parent, far, tmp2)
            st(sibling, near, parent)
            st(tmp1, _PC, sibling | _BLACK)
            if tmp2:
                self.set_parent(tmp2, parent)
            self.rotate_set_parents(parent, sibling, _BLACK)
            return

    def next(self, node: int) -> int:
        """``rb_next`` of a node in the tree."""
        ld = self.ld
        n = ld(node, _RIGHT)
        if n:
            while ld(n, _LEFT):
                self.tick()
                n = ld(n, _LEFT)
            return n
        parent = ld(node, _PC) & ~3
        while parent and node == ld(parent, _RIGHT):
            self.tick()
            node = parent
            parent = ld(node, _PC) & ~3
        return parent


def rbtree_add(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``__bpf_rbtree_add``: node ``r2`` placed by the program's ``less`` (``r3``: left
    of every node it is less than, right of the others) and the tree rebalanced; a
    node in a tree already (a refcounted object's) is not added, its object is
    dropped and the add is -EINVAL."""
    a = map_arena(vm)
    t = _Tree(vm.mem, r1)
    if t.ld(r2, _OWNER):
        a.drop(a.object_at(r2))
        return neg(errno.EINVAL)
    t.st(r2, _OWNER, _POISON)
    link, parent, leftmost = r1 + _ROOT, 0, True
    while (cur := int(vm.mem.load(link, 8))):
        parent = cur
        if vm.call_function(r3, r2, cur):
            link = cur + _LEFT
        else:
            link = cur + _RIGHT
            leftmost = False
    t.st(r2, _PC, parent)  # rb_link_node
    t.st(r2, _LEFT, 0)
    t.st(r2, _RIGHT, 0)
    vm.mem.store(link, 8, r2)
    if leftmost:
        t.st(r1, _LEFTMOST, r2)
    t.insert_color(r2)
    t.st(r2, _OWNER, r1)
    return 0


def rbtree_remove(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_rbtree_remove``: the node taken out of the tree (``rb_erase_cached``,
    then ``RB_CLEAR_NODE``), or NULL when it is not in this one."""
    map_arena(vm)
    t = _Tree(vm.mem, r1)
    if t.ld(r2, _OWNER) != r1:
        return 0
    if t.ld(r1, _LEFTMOST) == r2:
        t.st(r1, _LEFTMOST, t.next(r2))
    t.erase(r2)
    t.st(r2, _PC, r2)
    t.st(r2, _OWNER, 0)
    return r2


def rbtree_first(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_rbtree_first``: the leftmost node (``rb_first_cached``), NULL if none."""
    map_arena(vm)
    return int(vm.mem.load(r1 + _LEFTMOST, 8))


def rbtree_root(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_rbtree_root``: the root node, NULL for an empty tree."""
    map_arena(vm)
    return int(vm.mem.load(r1 + _ROOT, 8))


def _child(off: int) -> Callable[..., int]:
    def child(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        """``bpf_rbtree_left``/``bpf_rbtree_right``: the node's child, NULL when the node
        is not in this tree."""
        map_arena(vm)
        if int(vm.mem.load(r2 + _OWNER, 8)) != r1:
            return 0
        return int(vm.mem.load(r2 + off, 8))
    return child


def _postorder(words: Any, top: int) -> Iterator[int]:
    """The nodes under ``top`` children first (``rbtree_postorder_for_each_entry_safe``)."""
    def word(a: int, off: int) -> int:
        rel = a + off - ARENA_BASE
        if not 0 <= rel < ARENA_SIZE - 8 or rel % 8:
            raise HelperFault(f"rbtree node {a:#x} is not in the object arena")
        return int(words[rel >> 3])

    stack: list[tuple[int, bool]] = [(top, False)] if top else []
    for _ in range(ARENA_SIZE // 16):  # at most as many nodes as objects fit
        if not stack:
            return
        n, done = stack.pop()
        if done:
            yield n
            continue
        stack.append((n, True))
        for off in (_RIGHT, _LEFT):
            c = word(n, off)
            if c:
                stack.append((c, False))


def free_trees(buf: Any, base: int, stride: int, roots: tuple[tuple[int, int], ...]) -> None:
    """``bpf_rb_root_free`` of every root in the values in ``buf`` (the region at
    ``base``, values ``stride`` bytes apart): each is (offset in the value, offset of
    the node in the objects); the objects still in the tree are dropped, children
    first, and the root left zeroed (empty)."""
    a = arena()
    for at in range(0, len(buf) - stride + 1, stride):
        for off, node_off in roots:
            top = int.from_bytes(buf[at + off:at + off + 8], "little")
            buf[at + off:at + off + 16] = bytes(16)
            for n in list(_postorder(a.u64, top)):
                a.drop(n - node_off)


# -- native twins (the JIT) ---------------------------------------------------------------
#
# The tree's words are reached through @rb_w (a fake address's host pointer, a
# scratch word when unmapped: only a corrupt tree, which no verified program can
# make, reads zeros there), the rebalancing is lib/rbtree.c's in IR as above.

def _w_fn(natives: Natives) -> str:
    f = Text()
    f.at("entry")
    p = f.ins("call ptr @translate(ptr %ctx, i64 %addr, i64 8, i1 true)")
    null = f.ins(f"icmp eq ptr {p}, null")
    f.do(f"ret ptr {f.ins(f'select i1 {null}, ptr @rb_scratch, ptr {p}')}")
    return ("@rb_scratch = internal global i64 0, align 8\n" +
            f.text("define internal ptr @rb_w(ptr %ctx, i64 %addr) nounwind"))


class _Ir:
    """Goto-style IR over named i64 variables (allocas LLVM promotes), tree words
    through @rb_w."""

    def __init__(self, f: Text, names: tuple[str, ...], stop: str = "") -> None:
        self.f = f
        self.open = True
        self.stop = stop  # what a walk that meets a cycle returns: "void", "i64 0"
        for n in names:
            f.do(f"%v.{n} = alloca i64, align 8")
        if stop:
            f.do("%v.guard = alloca i64, align 8")
            f.do(f"store i64 {_MAX_STEPS}, ptr %v.guard, align 8")

    def loop(self, label: str) -> None:
        """The head of a walk's loop: _Tree.tick (a cycle returns ``stop``)."""
        self.at(label)
        left = self.op("load i64, ptr %v.guard, align 8")
        self.set("guard", self.op(f"sub i64 {left}, 1"))
        out, go = self.f.label("cycle"), self.f.label("go")
        self.cbr(self.op(f"icmp eq i64 {left}, 0"), out, go)
        self.f.at(out)
        self.f.do(f"ret {self.stop}")
        self.f.at(go)
        self.open = True

    def get(self, n: str) -> str:
        return self.f.ins(f"load i64, ptr %v.{n}, align 8")

    def set(self, n: str, v: str) -> None:
        self.f.do(f"store i64 {v}, ptr %v.{n}, align 8")

    def ld(self, a: str, off: int) -> str:
        f = self.f
        addr = f.ins(f"add i64 {a}, {off}") if off else a
        p = f.ins(f"call ptr @rb_w(ptr %ctx, i64 {addr})")
        return f.ins(f"load i64, ptr {p}, align 8")

    def st(self, a: str, off: int, v: str) -> None:
        f = self.f
        addr = f.ins(f"add i64 {a}, {off}") if off else a
        p = f.ins(f"call ptr @rb_w(ptr %ctx, i64 {addr})")
        f.do(f"store i64 {v}, ptr {p}, align 8")

    def op(self, text: str) -> str:
        return self.f.ins(text)

    def at(self, label: str) -> None:
        if self.open:
            self.f.br(label)
        self.f.at(label)
        self.open = True

    def goto(self, label: str) -> None:
        self.f.br(label)
        self.open = False

    def cbr(self, cond: str, yes: str, no: str) -> None:
        self.f.cbr(cond, yes, no)
        self.open = False

    def when(self, cond: str, label: str) -> str:
        """Branch to ``label`` when ``cond``; continue in a fresh block otherwise."""
        nxt = self.f.label("c")
        self.cbr(cond, label, nxt)
        self.f.at(nxt)
        self.open = True
        return nxt

    def nz(self, v: str) -> str:
        return self.op(f"icmp ne i64 {v}, 0")

    def black(self, n: str) -> str:
        return self.nz(self.op(f"and i64 {self.ld(n, _PC)}, 1"))

    def parent(self, n: str) -> str:
        return self.op(f"and i64 {self.ld(n, _PC)}, -4")

    def with_color(self, p: str, color: int) -> str:
        return self.op(f"or i64 {p}, {color}") if color else p

    def set_pc_if(self, child: str, parent: str, color: int) -> None:
        """``if (child) rb_set_parent_color(child, parent, color)``."""
        skip, setp = self.f.label("skip"), self.f.label("setp")
        self.cbr(self.nz(child), setp, skip)
        self.f.at(setp)
        self.open = True
        self.st(child, _PC, self.with_color(parent, color))
        self.at(skip)

    def ret(self, v: str = "") -> None:
        self.f.do(f"ret {'i64 ' + v if v else 'void'}")
        self.open = False


def _helpers_fn(natives: Natives) -> str:
    """@rb_change_child, @rb_rotate (__rb_rotate_set_parents), @rb_set_parent."""
    out = []
    f = Text()
    f.at("entry")
    b = _Ir(f, ())
    yes, no = f.label("p"), f.label("r")
    b.cbr(b.nz("%parent"), yes, no)
    f.at(yes)
    is_left = b.op(f"icmp eq i64 {b.ld('%parent', _LEFT)}, %old")
    off = b.op(f"select i1 {is_left}, i64 {_LEFT}, i64 {_RIGHT}")
    b.st(b.op(f"add i64 %parent, {off}"), 0, "%new")
    b.ret()
    f.at(no)
    b.st("%root", _ROOT, "%new")
    b.ret()
    out.append(f.text("define internal void @rb_change_child(ptr %ctx, i64 %root, i64 %old, "
                      "i64 %new, i64 %parent) nounwind"))
    f = Text()
    f.at("entry")
    b = _Ir(f, ())
    pc = b.ld("%old", _PC)
    b.st("%new", _PC, pc)
    b.st("%old", _PC, b.op("or i64 %new, %color"))
    f.do(f"call void @rb_change_child(ptr %ctx, i64 %root, i64 %old, i64 %new, "
         f"i64 {b.op(f'and i64 {pc}, -4')})")
    b.ret()
    out.append(f.text("define internal void @rb_rotate(ptr %ctx, i64 %root, i64 %old, "
                      "i64 %new, i64 %color) nounwind"))
    f = Text()
    f.at("entry")
    b = _Ir(f, ())
    color = b.op(f"and i64 {b.ld('%n', _PC)}, 1")
    b.st("%n", _PC, b.op(f"or i64 {color}, %p"))
    b.ret()
    out.append(f.text("define internal void @rb_set_parent(ptr %ctx, i64 %n, i64 %p) nounwind"))
    return "".join(out)


def _rotate(b: _Ir, old: str, new: str, color: int) -> None:
    b.f.do(f"call void @rb_rotate(ptr %ctx, i64 %root, i64 {old}, i64 {new}, i64 {color})")


def _insert_fn(natives: Natives) -> str:
    """@rb_insert_color(ctx, root, node): _Tree.insert_color."""
    f = Text()
    f.at("entry")
    b = _Ir(f, ("node", "parent", "gp", "tmp"), "void")
    b.set("node", "%node")
    b.set("parent", b.ld("%node", _PC))
    loop, done = f.label("loop"), f.label("done")
    b.loop(loop)
    parent = b.get("parent")
    top = f.label("top")
    b.when(b.op(f"icmp eq i64 {parent}, 0"), top)
    b.when(b.black(parent), done)
    gp = b.ld(parent, _PC)
    b.set("gp", gp)
    sides = f.label("left"), f.label("right")
    b.cbr(b.op(f"icmp ne i64 {b.ld(gp, _RIGHT)}, {parent}"), *sides)
    for label, (near, far) in zip(sides, ((_LEFT, _RIGHT), (_RIGHT, _LEFT)), strict=True):
        b.at(label)
        gp, parent, node = b.get("gp"), b.get("parent"), b.get("node")
        tmp = b.ld(gp, far)
        b.set("tmp", tmp)
        flip, no_flip = f.label("flip"), f.label("noflip")
        red = f.label("red")
        b.cbr(b.nz(tmp), red, no_flip)
        f.at(red)
        b.open = True
        b.cbr(b.black(tmp), no_flip, flip)
        f.at(flip)
        b.open = True
        b.st(tmp, _PC, b.with_color(gp, _BLACK))
        b.st(parent, _PC, b.with_color(gp, _BLACK))
        b.set("node", gp)
        up = b.parent(gp)
        b.set("parent", up)
        b.st(gp, _PC, up)
        b.goto(loop)
        f.at(no_flip)
        b.open = True
        tmp = b.ld(parent, far)
        case3 = f.label("case3")
        rot = f.label("case2")
        b.set("tmp", tmp)
        b.cbr(b.op(f"icmp eq i64 {node}, {tmp}"), rot, case3)
        f.at(rot)
        b.open = True
        t2 = b.ld(node, near)
        b.st(parent, far, t2)
        b.st(node, near, parent)
        b.set_pc_if(t2, parent, _BLACK)
        b.st(parent, _PC, node)
        b.set("parent", node)
        b.set("tmp", b.ld(node, far))
        b.at(case3)
        gp, parent, tmp = b.get("gp"), b.get("parent"), b.get("tmp")
        b.st(gp, near, tmp)
        b.st(parent, far, gp)
        b.set_pc_if(tmp, gp, _BLACK)
        _rotate(b, gp, parent, _RED)
        b.goto(done)
    f.at(top)
    b.open = True
    b.st(b.get("node"), _PC, str(_BLACK))
    b.at(done)
    b.ret()
    return f.text("define internal void @rb_insert_color(ptr %ctx, i64 %root, i64 %node) "
                  "nounwind")


def _erase_color_fn(natives: Natives) -> str:
    """@rb_erase_color(ctx, root, parent): _Tree.erase_color."""
    f = Text()
    f.at("entry")
    b = _Ir(f, ("node", "parent", "sib", "t1", "t2"), "void")
    b.set("node", "0")
    b.set("parent", "%parent")
    loop, done = f.label("loop"), f.label("done")
    b.loop(loop)
    parent = b.get("parent")
    sides = f.label("left"), f.label("right")
    b.cbr(b.op(f"icmp ne i64 {b.get('node')}, {b.ld(parent, _RIGHT)}"), *sides)
    for label, (near, far) in zip(sides, ((_LEFT, _RIGHT), (_RIGHT, _LEFT)), strict=True):
        b.at(label)
        parent = b.get("parent")
        sib = b.ld(parent, far)
        b.set("sib", sib)
        c1, after1 = f.label("case1"), f.label("after1")
        b.cbr(b.black(sib), after1, c1)
        f.at(c1)
        b.open = True
        t1 = b.ld(sib, near)
        b.st(parent, far, t1)
        b.st(sib, near, parent)
        b.st(t1, _PC, b.with_color(parent, _BLACK))
        _rotate(b, parent, sib, _RED)
        b.set("sib", t1)
        b.at(after1)
        sib, parent = b.get("sib"), b.get("parent")
        t1 = b.ld(sib, far)
        b.set("t1", t1)
        case4 = f.label("case4")
        chk = f.label("chk")
        b.cbr(b.nz(t1), chk, f"{label}.c2")
        f.at(chk)
        b.open = True
        b.cbr(b.black(t1), f"{label}.c2", case4)
        f.at(f"{label}.c2")
        b.open = True
        t2 = b.ld(sib, near)
        b.set("t2", t2)
        flip, c3, chk2 = f.label("case2"), f.label("case3"), f.label("chk")
        b.cbr(b.nz(t2), chk2, flip)
        f.at(chk2)
        b.open = True
        b.cbr(b.black(t2), flip, c3)
        f.at(flip)
        b.open = True
        b.st(sib, _PC, parent)  # red
        red_p, black_p = f.label("redp"), f.label("blackp")
        b.cbr(b.black(parent), black_p, red_p)
        f.at(red_p)
        b.open = True
        b.st(parent, _PC, b.op(f"or i64 {b.ld(parent, _PC)}, 1"))
        b.goto(done)
        f.at(black_p)
        b.open = True
        b.set("node", parent)
        up = b.parent(parent)
        b.set("parent", up)
        b.cbr(b.nz(up), loop, done)
        f.at(c3)
        b.open = True
        t2 = b.get("t2")
        t1 = b.ld(t2, far)
        b.st(sib, near, t1)
        b.st(t2, far, sib)
        b.st(parent, far, t2)
        b.set_pc_if(t1, sib, _BLACK)
        b.set("t1", sib)
        b.set("sib", t2)
        b.at(case4)
        sib, parent, t1 = b.get("sib"), b.get("parent"), b.get("t1")
        t2 = b.ld(sib, near)
        b.st(parent, far, t2)
        b.st(sib, near, parent)
        b.st(t1, _PC, b.with_color(sib, _BLACK))
        skip, setp = f.label("skip"), f.label("setp")
        b.cbr(b.nz(t2), setp, skip)
        f.at(setp)
        b.open = True
        f.do(f"call void @rb_set_parent(ptr %ctx, i64 {t2}, i64 {parent})")
        b.at(skip)
        _rotate(b, parent, sib, _BLACK)
        b.goto(done)
    f.at(done)
    b.open = True
    b.ret()
    return f.text("define internal void @rb_erase_color(ptr %ctx, i64 %root, i64 %parent) "
                  "nounwind")


def _erase_fn(natives: Natives) -> str:
    """@rb_erase(ctx, root, node): _Tree.erase."""
    f = Text()
    f.at("entry")
    b = _Ir(f, ("reb", "parent", "succ", "child2"), "void")
    node = "%node"
    child, tmp = b.ld(node, _RIGHT), b.ld(node, _LEFT)
    one, two, both = f.label("one"), f.label("two"), f.label("both")
    fin = f.label("fin")
    b.cbr(b.nz(tmp), two, one)
    f.at(one)  # at most a right child
    b.open = True
    pc = b.ld(node, _PC)
    parent = b.op(f"and i64 {pc}, -4")
    f.do(f"call void @rb_change_child(ptr %ctx, i64 %root, i64 {node}, i64 {child}, "
         f"i64 {parent})")
    has, none = f.label("has"), f.label("none")
    b.cbr(b.nz(child), has, none)
    f.at(has)
    b.open = True
    b.st(child, _PC, pc)
    b.set("reb", "0")
    b.goto(fin)
    f.at(none)
    b.open = True
    b.set("reb", b.op(f"select i1 {b.nz(b.op(f'and i64 {pc}, 1'))}, i64 {parent}, i64 0"))
    b.goto(fin)
    f.at(two)
    b.open = True
    b.cbr(b.nz(child), both, f"{two}.l")
    f.at(f"{two}.l")  # only a left child
    b.open = True
    pc = b.ld(node, _PC)
    b.st(tmp, _PC, pc)
    f.do(f"call void @rb_change_child(ptr %ctx, i64 %root, i64 {node}, i64 {tmp}, "
         f"i64 {b.op(f'and i64 {pc}, -4')})")
    b.set("reb", "0")
    b.goto(fin)
    f.at(both)
    b.open = True
    b.set("succ", child)
    first = b.ld(child, _LEFT)
    direct, walk = f.label("direct"), f.label("walk")
    linked = f.label("linked")
    b.cbr(b.nz(first), walk, direct)
    f.at(direct)
    b.open = True
    b.set("parent", child)
    b.set("child2", b.ld(child, _RIGHT))
    b.goto(linked)
    f.at(walk)
    b.open = True
    b.set("parent", child)
    b.set("succ", first)
    down, out = f.label("down"), f.label("out")
    b.loop(down)
    s = b.get("succ")
    nxt = b.ld(s, _LEFT)
    go = f.label("go")
    b.cbr(b.nz(nxt), go, out)
    f.at(go)
    b.open = True
    b.set("parent", s)
    b.set("succ", nxt)
    b.goto(down)
    f.at(out)
    b.open = True
    s, parent = b.get("succ"), b.get("parent")
    c2 = b.ld(s, _RIGHT)
    b.set("child2", c2)
    b.st(parent, _LEFT, c2)
    b.st(s, _RIGHT, child)
    f.do(f"call void @rb_set_parent(ptr %ctx, i64 {child}, i64 {s})")
    b.at(linked)
    s, parent, c2 = b.get("succ"), b.get("parent"), b.get("child2")
    left = b.ld(node, _LEFT)
    b.st(s, _LEFT, left)
    f.do(f"call void @rb_set_parent(ptr %ctx, i64 {left}, i64 {s})")
    pc = b.ld(node, _PC)
    f.do(f"call void @rb_change_child(ptr %ctx, i64 %root, i64 {node}, i64 {s}, "
         f"i64 {b.op(f'and i64 {pc}, -4')})")
    y, n = f.label("c2"), f.label("noc2")
    b.cbr(b.nz(c2), y, n)
    f.at(y)
    b.open = True
    b.st(s, _PC, pc)
    b.st(c2, _PC, b.with_color(parent, _BLACK))
    b.set("reb", "0")
    b.goto(fin)
    f.at(n)
    b.open = True
    pc2 = b.ld(s, _PC)
    b.st(s, _PC, pc)
    b.set("reb", b.op(f"select i1 {b.nz(b.op(f'and i64 {pc2}, 1'))}, i64 {parent}, i64 0"))
    b.goto(fin)
    f.at(fin)
    b.open = True
    reb = b.get("reb")
    do, end = f.label("reb"), f.label("end")
    b.cbr(b.nz(reb), do, end)
    f.at(do)
    b.open = True
    f.do(f"call void @rb_erase_color(ptr %ctx, i64 %root, i64 {reb})")
    b.at(end)
    b.ret()
    return f.text("define internal void @rb_erase(ptr %ctx, i64 %root, i64 %node) nounwind")


def _next_fn(natives: Natives) -> str:
    """@rb_next(ctx, node): _Tree.next."""
    f = Text()
    f.at("entry")
    b = _Ir(f, ("n", "p"), "i64 0")
    r = b.ld("%node", _RIGHT)
    down, up = f.label("down"), f.label("up")
    b.set("n", r)
    b.cbr(b.nz(r), down, up)
    b.loop(down)
    n = b.get("n")
    left = b.ld(n, _LEFT)
    more, done = f.label("more"), f.label("done")
    b.cbr(b.nz(left), more, done)
    f.at(more)
    b.open = True
    b.set("n", left)
    b.goto(down)
    f.at(done)
    b.open = True
    b.ret(n)
    f.at(up)
    b.open = True
    b.set("n", "%node")
    b.set("p", b.parent("%node"))
    loop, climb, found = f.label("loop"), f.label("climb"), f.label("found")
    b.loop(loop)
    p, n = b.get("p"), b.get("n")
    chk = f.label("chk")
    b.cbr(b.nz(p), chk, found)
    f.at(chk)
    b.open = True
    b.cbr(b.op(f"icmp eq i64 {n}, {b.ld(p, _RIGHT)}"), climb, found)
    f.at(climb)
    b.open = True
    b.set("n", p)
    b.set("p", b.parent(p))
    b.goto(loop)
    f.at(found)
    b.open = True
    b.ret(b.get("p"))
    return f.text("define internal i64 @rb_next(ptr %ctx, i64 %node) nounwind")


for _name, _def in (("rb_w", _w_fn), ("rb_helpers", _helpers_fn),
                    ("rb_insert_color", _insert_fn), ("rb_erase_color", _erase_color_fn),
                    ("rb_erase", _erase_fn), ("rb_next", _next_fn)):
    register_shared(_name, _def)
_NEEDS = ("translate", "rb_w", "rb_helpers")


def _add_fn(natives: Natives) -> str:
    """@rbtree_add(ctx, root, node, less, depth): the descent calls ``less`` (the
    program's callback entry) natively; a node in a tree already goes to Python."""
    f = Text()
    f.at("entry")
    b = _Ir(f, ("link", "parent", "lm"))
    ret_if(f, f.ins(f"icmp uge i64 %depth, {MAX_CALL_FRAMES}"), SLOW)  # Python refuses it
    host_or_slow(f, "%r1", 16)
    np_ = host_or_slow(f, "%r2", _NODE_SIZE)
    ret_if(f, f.ins(f"icmp ne i64 {f.ins(f'load i64, ptr {f.gep(np_, _OWNER)}, align 8')}, 0"),
           SLOW)
    f.do(f"store i64 {c64(_POISON)}, ptr {f.gep(np_, _OWNER)}, align 8")
    b.set("link", "%r1")
    b.set("parent", "0")
    b.set("lm", "1")
    loop, linked = f.label("loop"), f.label("link")
    b.at(loop)
    cur = b.ld(b.get("link"), 0)
    step = f.label("step")
    b.cbr(b.nz(cur), step, linked)
    f.at(step)
    b.open = True
    b.set("parent", cur)
    less = f.ins(f"call i64 %less(ptr %ctx, i64 %depth, i64 %r2, i64 {cur}, i64 0, i64 0, "
                 "i64 0)")
    stopped, go = f.label("stopped"), f.label("go")
    b.cbr(f.ins(f"icmp ne i64 {f.cget('%ctx', 'status')}, 0"), stopped, go)
    f.at(stopped)  # the callback faulted or threw: the call site unwinds
    b.ret("0")
    f.at(go)
    b.open = True
    is_less = b.nz(less)
    side = b.op(f"select i1 {is_less}, i64 {_LEFT}, i64 {_RIGHT}")
    b.set("link", b.op(f"add i64 {cur}, {side}"))
    b.set("lm", b.op(f"select i1 {is_less}, i64 {b.get('lm')}, i64 0"))
    b.goto(loop)
    f.at(linked)
    b.open = True
    b.st("%r2", _PC, b.get("parent"))
    b.st("%r2", _LEFT, "0")
    b.st("%r2", _RIGHT, "0")
    b.st(b.get("link"), 0, "%r2")
    lm, skip = f.label("lm"), f.label("nolm")
    b.cbr(b.nz(b.get("lm")), lm, skip)
    f.at(lm)
    b.open = True
    b.st("%r1", _LEFTMOST, "%r2")
    b.at(skip)
    f.do("call void @rb_insert_color(ptr %ctx, i64 %r1, i64 %r2)")
    b.st("%r2", _OWNER, "%r1")
    b.ret("0")
    return f.text("define internal i64 @rbtree_add(ptr %ctx, i64 %r1, i64 %r2, ptr %less, "
                  "i64 %depth) nounwind")


def _remove_fn(natives: Natives) -> str:
    f = Text()
    f.at("entry")
    b = _Ir(f, ())
    host_or_slow(f, "%r1", 16)
    np_ = host_or_slow(f, "%r2", _NODE_SIZE)
    owner = f.ins(f"load i64, ptr {f.gep(np_, _OWNER)}, align 8")
    ret_if(f, f.ins(f"icmp ne i64 {owner}, %r1"), 0)
    was, keep = f.label("first"), f.label("keep")
    b.cbr(f.ins(f"icmp eq i64 {b.ld('%r1', _LEFTMOST)}, %r2"), was, keep)
    f.at(was)
    b.open = True
    b.st("%r1", _LEFTMOST, f.ins("call i64 @rb_next(ptr %ctx, i64 %r2)"))
    b.at(keep)
    f.do("call void @rb_erase(ptr %ctx, i64 %r1, i64 %r2)")
    b.st("%r2", _PC, "%r2")
    b.st("%r2", _OWNER, "0")
    b.ret("%r2")
    return f.text("define internal i64 @rbtree_remove(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def _word_fn(kind: str, off: int) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """bpf_rbtree_first/root: a word of the root."""
        f = Text()
        f.at("entry")
        hp = host_or_slow(f, "%r1", 16)
        f.do(f"ret i64 {f.ins(f'load i64, ptr {f.gep(hp, off)}, align 8')}")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1) nounwind")
    return define


def _child_fn(kind: str, off: int) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """bpf_rbtree_left/right: the child of a node of this tree."""
        f = Text()
        f.at("entry")
        np_ = host_or_slow(f, "%r2", _NODE_SIZE)
        owner = f.ins(f"load i64, ptr {f.gep(np_, _OWNER)}, align 8")
        ret_if(f, f.ins(f"icmp ne i64 {owner}, %r1"), 0)
        f.do(f"ret i64 {f.ins(f'load i64, ptr {f.gep(np_, off)}, align 8')}")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2) nounwind")
    return define


RBTREE_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_rbtree_add_impl": rbtree_add, "bpf_rbtree_remove": rbtree_remove,
    "bpf_rbtree_first": rbtree_first, "bpf_rbtree_root": rbtree_root,
    "bpf_rbtree_left": _child(_LEFT), "bpf_rbtree_right": _child(_RIGHT)}
register_kfunc("bpf_rbtree_add_impl", rbtree_add,
               HelperNative("rbtree_add", 2, _add_fn,
                            (*_NEEDS, "rb_insert_color"), callback=3))
register_kfunc("bpf_rbtree_remove", rbtree_remove,
               HelperNative("rbtree_remove", 2, _remove_fn,
                            (*_NEEDS, "rb_next", "rb_erase", "rb_erase_color")))
register_kfunc("bpf_rbtree_first", rbtree_first,
               HelperNative("rbtree_first", 1, _word_fn("rbtree_first", _LEFTMOST),
                            ("translate",)))
register_kfunc("bpf_rbtree_root", rbtree_root,
               HelperNative("rbtree_root", 1, _word_fn("rbtree_root", _ROOT), ("translate",)))
for _k, _off in (("left", _LEFT), ("right", _RIGHT)):
    register_kfunc(f"bpf_rbtree_{_k}", RBTREE_KFUNCS[f"bpf_rbtree_{_k}"],
                   HelperNative(f"rbtree_{_k}", 2, _child_fn(f"rbtree_{_k}", _off),
                                ("translate",)))
# an object holding a bpf_rb_root empties it when dropped (bpf_obj_free_fields)
register_root_free("bpf_rb_root", free_trees)
