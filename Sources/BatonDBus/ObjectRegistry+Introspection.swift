// SPDX-License-Identifier: LGPL-2.1-or-later
extension ObjectRegistry {
    /// The introspection XML of `path` (`object`: what is exported there, nil for an intermediate node).
    func introspectionXML(for path: String, object: ExportedObject?) -> String {
        var xml = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
            "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>

            """
        func argument(_ argument: DBusArgument, direction: String?) -> String {
            let directionAttribute = direction.map { " direction=\"\($0)\"" } ?? ""
            return "      <arg name=\"\(xmlEscape(argument.name))\" type=\"\(xmlEscape(argument.signature))\"\(directionAttribute)/>\n"
        }
        xml += """
              <interface name="\(introspectableInterface)">
                <method name="Introspect">
                  <arg name="xml_data" type="s" direction="out"/>
                </method>
              </interface>
              <interface name="\(peerInterface)">
                <method name="Ping"/>
                <method name="GetMachineId">
                  <arg name="machine_uuid" type="s" direction="out"/>
                </method>
              </interface>

            """
        if let object {
            xml += """
                  <interface name="\(propertiesInterface)">
                    <method name="Get">
                      <arg name="interface_name" type="s" direction="in"/>
                      <arg name="property_name" type="s" direction="in"/>
                      <arg name="value" type="v" direction="out"/>
                    </method>
                    <method name="GetAll">
                      <arg name="interface_name" type="s" direction="in"/>
                      <arg name="properties" type="a{sv}" direction="out"/>
                    </method>
                    <method name="Set">
                      <arg name="interface_name" type="s" direction="in"/>
                      <arg name="property_name" type="s" direction="in"/>
                      <arg name="value" type="v" direction="in"/>
                    </method>
                    <signal name="PropertiesChanged">
                      <arg name="interface_name" type="s"/>
                      <arg name="changed_properties" type="a{sv}"/>
                      <arg name="invalidated_properties" type="as"/>
                    </signal>
                  </interface>

                """
            if managerRoots.contains(path) {
                xml += """
                      <interface name="\(objectManagerInterface)">
                        <method name="GetManagedObjects">
                          <arg name="objects" type="a{oa{sa{sv}}}" direction="out"/>
                        </method>
                        <signal name="InterfacesAdded">
                          <arg name="object" type="o"/>
                          <arg name="interfaces" type="a{sa{sv}}"/>
                        </signal>
                        <signal name="InterfacesRemoved">
                          <arg name="object" type="o"/>
                          <arg name="interfaces" type="as"/>
                        </signal>
                      </interface>

                    """
            }
            for interface in object.interfaces {
                xml += "  <interface name=\"\(xmlEscape(interface.name))\">\n"
                for method in interface.methods {
                    xml += "    <method name=\"\(xmlEscape(method.name))\">\n"
                    for arg in method.inArguments { xml += argument(arg, direction: "in") }
                    for arg in method.outArguments { xml += argument(arg, direction: "out") }
                    xml += "    </method>\n"
                }
                for signal in interface.signals {
                    xml += "    <signal name=\"\(xmlEscape(signal.name))\">\n"
                    for arg in signal.arguments { xml += argument(arg, direction: nil) }
                    xml += "    </signal>\n"
                }
                for property in interface.properties {
                    let access = property.access == .readwrite ? "readwrite" : "read"
                    xml += "    <property name=\"\(xmlEscape(property.name))\" type=\"\(xmlEscape(property.signature))\" access=\"\(access)\"/>\n"
                }
                xml += "  </interface>\n"
            }
        }
        for child in childNodes(of: path) { xml += "  <node name=\"\(xmlEscape(child))\"/>\n" }
        xml += "</node>\n"
        return xml
    }
}

func xmlEscape(_ text: String) -> String {
    var escaped = ""
    for character in text {
        switch character {
        case "&": escaped += "&amp;"
        case "<": escaped += "&lt;"
        case ">": escaped += "&gt;"
        case "\"": escaped += "&quot;"
        case "'": escaped += "&apos;"
        default: escaped.append(character)
        }
    }
    return escaped
}
