export { Router, fleetWorkers, type FleetWorkers, type RouterArgs, type RouterHost } from "./router";
export { RouterSchema, ROUTER_POLICIES, type RouterConfig } from "./schema";
export { ROUTER_UNIT, SMG_VERSION, renderRouterUnit, routerLaunchConfig, routerIdentity, routerHome } from "./render";
