# The control plane and the worker gate in one image (docs/operations.md#the-compose-stack); the config file decides the role.
# Node 24 runs the TypeScript sources itself: no compiler and no tsx at run time.
ARG NODE_IMAGE=node:24.21.0-slim

# Production dependencies only.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

# Bundles the workflow code once at build time, so a container never spends start-up time or memory on webpack.
FROM ${NODE_IMAGE} AS workflow-bundle
WORKDIR /app
ENV RCP_CACHE_DIR=/bundle-cache
COPY --from=deps /app/node_modules ./node_modules
COPY . .
RUN node --input-type=module -e "await (await import('./platform/temporal/workflow-bundle.ts')).loadWorkflowBundle(console.log)"

FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY . .
# The image's `node` user (uid 1000) runs the service; its cache holds the workflow bundle and the stripped sources.
COPY --from=workflow-bundle --chown=node:node /bundle-cache /home/node/.cache/research-control-plane
# The state folder, and the folders the compose stack shares between replicas (papers, projects): a named volume
# mounted on a folder of the image takes its owner and mode on first use.
RUN install -d -o node -g node -m 0700 /var/lib/research-control-plane /var/lib/research-control-plane/papers /srv/research-control-plane/projects
USER node
EXPOSE 8787
CMD ["node", "--max-semi-space-size=1", "bin/start.js"]
