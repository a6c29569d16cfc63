// The component's entry module: the host's imports in, `plugin` out.
import * as cache from 'kubewasm:controller/cache@0.3.0';
import * as log from 'kubewasm:controller/log@0.3.0';
import { exportPlugin } from '@kubewasm/guest';

import { replicator } from './replicator.js';

export const plugin = exportPlugin(replicator, { cache, log });
