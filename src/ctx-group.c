/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ctx-group.c - the public calls of object groups (S35-S37) and of
 * objects that need their ctx: a group is linked into its ctx's
 * c->groups (under purge_lock and c->lock, with room reserved in the
 * purge heap for its logs); its purge and limit run the purge engine on
 * its objects alone (vr_ctx_purge_in); obj-group.c has the group itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "vrange.h"
#include "base/callback.h"
#include "base/inject.h"
#include "base/lock.h"
#include "base/sys.h"
#include "obj/obj.h"
#include "ctx.h"

static struct vr_objs *live_group(struct vr_group *g)
{
	if (!g)
		return NULL;
	struct vr_objs *os = vr_group_objs(g);
	return vr_inherited_ctx(vr_objs_ctx(os)) ? NULL : os;
}

_export_ struct vr_group *vr_ctx_group(struct vr_ctx *ctx)
{
	return !ctx || vr_inherited_ctx(ctx) ? NULL : vr_objs_group(ctx->objs);
}

/* links os into c (reserving the purge heap's room for its logs) */
static int link_group(struct vr_ctx *c, struct vr_objs *os)
{
	int err = 0;
	vr_lock(&c->purge_lock, VR_RANK_PURGE);
	vr_lock(&c->lock, VR_RANK_CTX);
	if (c->ngroups == c->groups_cap) {
		size_t cap = 2 * c->groups_cap;
		struct vr_objs **a = vr_malloc(cap * sizeof(*a));
		if (a) {
			for (size_t i = 0; i < c->ngroups; i++)
				a[i] = c->groups[i];
			free(c->groups);
			c->groups = a;
			c->groups_cap = cap;
		}
	}
	if (c->ngroups == c->groups_cap) {
		err = -ENOMEM;
	} else {
		c->groups[c->ngroups++] = os;
		err = vr_purge_reserve(c, c->nregions);
		if (err < 0)
			c->ngroups--;
	}
	vr_unlock(&c->lock);
	vr_unlock(&c->purge_lock);
	return err;
}

_export_ int vr_group_new(struct vr_ctx *ctx, int priority, struct vr_group **out)
{
	VR_API_ENTRY;
	if (!ctx || !out || priority < 0 || priority >= VR_NPRIO || vr_inherited_ctx(ctx))
		return -EINVAL;
	struct vr_objs *os = vr_objs_create(ctx, priority, false);
	if (!os)
		return -ENOMEM;
	int err = link_group(ctx, os);
	if (err < 0) {
		vr_objs_put(os);
		return err;
	}
	*out = vr_objs_group(os);
	return 0;
}

static void unlink_group(struct vr_ctx *c, struct vr_objs *os)
{
	for (size_t i = 0; i < c->ngroups; i++)
		if (c->groups[i] == os) {
			c->groups[i] = c->groups[--c->ngroups];
			return;
		}
}

_export_ void vr_group_destroy(struct vr_group *g)
{
	VR_API_ENTRY;
	VR_API_NOCANCEL; /* its chunks' fds closed */
	if (!g)
		return;
	struct vr_objs *os = vr_group_objs(g);
	struct vr_ctx *c = vr_objs_ctx(os);
	if (vr_inherited_ctx(c)) {
		/* a fork child: inherited objects may only be freed, and its
		 * locks may be held by threads that do not exist here */
		if (os == c->objs)
			return;
		if (!vr_ctx_fork_whole(c))
			return; /* the group array may be half-changed: left */
		vr_lock(&vr_global_lock, VR_RANK_GLOBAL);
		unlink_group(c, os);
		vr_unlock(&vr_global_lock);
		vr_objs_free_inherited(os);
		return;
	}
	if (os == c->objs) { /* the default group stays (S35) */
		vr_objs_free_all(os);
		/* its handler stays too, but no call of it runs when this
		 * returns, as for any group: a call in flight entered its
		 * section before it claimed its object, and a report that
		 * starts later finds the objects freed (obj-group.c report) */
		vr_cb_synchronize();
		return;
	}
	/* no handler call of this group runs (but in this thread) nor starts
	 * from here on; a purging thread that still holds a reference only
	 * reads the group's memory */
	vr_objs_set_purge_handler(os, NULL, NULL);
	vr_lock(&c->purge_lock, VR_RANK_PURGE);
	vr_lock(&c->lock, VR_RANK_CTX);
	unlink_group(c, os);
	vr_objs_retire(os);
	vr_unlock(&c->lock);
	vr_unlock(&c->purge_lock);
	/* its objects are freed now (S35), also when a purging thread's
	 * report batch keeps the group's memory a while longer: vr_obj_of
	 * must not return them meanwhile */
	vr_objs_unregister(os);
	vr_objs_put(os);
}

_export_ int vr_obj_new_in(struct vr_group *g, size_t size, size_t extra, unsigned flags,
			   struct vr_obj **out)
{
	VR_API_ENTRY;
	size_t pm = (vr_page_size()) - 1;
	struct vr_objs *os = live_group(g);
	if (!os || !out || flags || size == 0 || size > SIZE_MAX - pm || extra > VR_OBJ_EXTRA_MAX)
		return -EINVAL;
	if ((uint64_t)size >= (uint64_t)1 << 47)
		return -ENOMEM;
	return vr_objs_new_obj(os, size, extra, out);
}

_export_ int vr_obj_new(struct vr_ctx *ctx, size_t size, unsigned flags, struct vr_obj **out)
{
	if (!ctx)
		return -EINVAL;
	return vr_obj_new_in(vr_ctx_group(ctx), size, 0, flags, out);
}

_export_ int vr_ctx_set_obj_fault_handler(struct vr_ctx *ctx, vr_obj_fault_fn fn, void *arg)
{
	VR_API_ENTRY;
	if (!ctx || vr_inherited_ctx(ctx))
		return -EINVAL;
	vr_obj_set_fault_handler(ctx, fn, arg);
	return 0;
}

_export_ ssize_t vr_group_purge(struct vr_group *g, size_t bytes)
{
	VR_API_ENTRY;
	struct vr_objs *os = live_group(g);
	if (!os)
		return -EINVAL;
	if (bytes == 0)
		return 0;
	return vr_ctx_purge_in(vr_objs_ctx(os), os, VR_PURGE_BYTES, bytes);
}

_export_ int vr_group_set_limit(struct vr_group *g, size_t bytes)
{
	VR_API_ENTRY;
	struct vr_objs *os = live_group(g);
	if (!os)
		return -EINVAL;
	vr_objs_set_limit(os, bytes);
	size_t limit = vr_objs_over_limit(os);
	if (limit) {
		ssize_t n = vr_ctx_purge_in(vr_objs_ctx(os), os, VR_PURGE_VOLATILE, limit);
		if (n < 0)
			return (int)n;
	}
	return 0;
}

_export_ uint64_t vr_group_stat(struct vr_group *g, enum vr_stat which)
{
	VR_API_ENTRY;
	struct vr_objs *os = live_group(g);
	return os ? vr_objs_stat(os, which) : 0;
}

_export_ int vr_group_set_purge_handler(struct vr_group *g, vr_purge_fn fn, void *arg)
{
	VR_API_ENTRY;
	struct vr_objs *os = live_group(g);
	return os ? vr_objs_set_purge_handler(os, fn, arg) : -EINVAL;
}
